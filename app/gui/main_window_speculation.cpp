// MainWindow's speculative decoding wiring: the sampling panel's controls restored from and
// saved to QSettings, changes sent to the worker (which swaps the engine's proposer off the
// GUI thread, loading a draft model if one is chosen), the result shown (chat legend, live k,
// status bar) and failures explained.
#include <QFileInfo>
#include <QSettings>
#include <QStatusBar>
#include <algorithm>

#include "chat_view.h"
#include "inference_worker.h"
#include "main_window.h"
#include "runtime/engine.h"
#include "sampling_panel.h"
#include "speculation_controls.h"

namespace tokenscope::app {

namespace {

constexpr int kSpeculationNoticeMs = 8000;
static_assert(ui::SpeculationSettings::kMaxK == runtime::kMaxSpeculationK);

ui::SpeculationSettings saved_speculation() {
    QSettings settings;
    ui::SpeculationSettings s;
    s.mode = ui::speculationModeFromName(settings.value("speculation/mode", "off").toString());
    s.draft_path = settings.value("speculation/draft").toString();
    s.max_k = std::clamp(settings.value("speculation/max_k", s.max_k).toInt(), 1,
                         ui::SpeculationSettings::kMaxK);
    if (s.mode == ui::SpeculationSettings::Mode::Draft && s.draft_path.isEmpty())
        s.mode = ui::SpeculationSettings::Mode::Off;
    return s;
}

void save_speculation(const ui::SpeculationSettings& s) {
    QSettings settings;
    settings.setValue("speculation/mode", ui::speculationModeName(s.mode));
    settings.setValue("speculation/draft", s.draft_path);
    settings.setValue("speculation/max_k", s.max_k);
}

QString describe(const ui::SpeculationSettings& s) {
    switch (s.mode) {
        case ui::SpeculationSettings::Mode::Lookup:
            return MainWindow::tr("Speculative decoding: prompt lookup, up to %1 tokens per step")
                .arg(s.max_k);
        case ui::SpeculationSettings::Mode::Draft:
            return MainWindow::tr("Speculative decoding: draft model %1, up to %2 tokens per step")
                .arg(QFileInfo(s.draft_path).fileName())
                .arg(s.max_k);
        case ui::SpeculationSettings::Mode::Off:
            break;
    }
    return MainWindow::tr("Speculative decoding off");
}

}  // namespace

void MainWindow::connect_speculation() {
    ui::SpeculationControls* controls = sampling_->speculationControls();
    // The saved choice is what the first load uses (openModel reads the panel).
    const ui::SpeculationSettings saved = saved_speculation();
    controls->setSettings(saved);
    chat_->setSpeculationLegendVisible(saved.mode != ui::SpeculationSettings::Mode::Off);

    connect(controls, &ui::SpeculationControls::speculationChanged, this,
            [this](const ui::SpeculationSettings& s) {
                if (generating_) {
                    pending_speculation_ = s;
                    statusBar()->showMessage(tr("Speculation changes when this reply is finished"),
                                             kSpeculationNoticeMs);
                    return;
                }
                apply_speculation(s);
            });
    connect(worker_, &InferenceWorker::speculationApplied, this,
            [this](const ui::SpeculationSettings& s) {
                // What the engine runs with: the panel shows it and the next start uses it
                // (a choice that failed is not saved, so it does not fail again at start-up).
                sampling_->speculationControls()->setSettings(s);
                save_speculation(s);
                chat_->setSpeculationLegendVisible(s.mode != ui::SpeculationSettings::Mode::Off);
                if (model_ready_) statusBar()->showMessage(describe(s), kSpeculationNoticeMs);
            });
    connect(worker_, &InferenceWorker::speculationFailed, this, [this](const QString& message) {
        statusBar()->showMessage(tr("Speculative decoding not available: %1").arg(message),
                                 kSpeculationNoticeMs);
        show_error(tr("Speculative decoding not available"),
                   tr("%1\n\nThe model runs without this speculation setting.").arg(message));
    });
    connect(worker_, &InferenceWorker::metricsChanged, this, [this](const ui::MetricsData& m) {
        sampling_->speculationControls()->setCurrentK(m.speculating ? m.current_k : -1);
    });
}

void MainWindow::apply_speculation(const ui::SpeculationSettings& settings) {
    statusBar()->showMessage(settings.mode == ui::SpeculationSettings::Mode::Draft
                                 ? tr("Loading the draft model…")
                                 : tr("Changing speculative decoding…"));
    QMetaObject::invokeMethod(worker_, "setSpeculation", Qt::QueuedConnection,
                              Q_ARG(tokenscope::ui::SpeculationSettings, settings));
}

}  // namespace tokenscope::app
