// MainWindow's teaching mode: the Step dock (step mode's pipeline), the Heads dock (every head
// of a layer + the layer x head overview), the Tools menu with Step (F10), and their wiring to
// the worker. Step mode never blocks: the worker holds the submitted reply between queued
// stepOnce calls, so the GUI thread only sends a command and draws what comes back.
#include <QDockWidget>
#include <QMenu>
#include <QMenuBar>
#include <QScrollArea>
#include <QSplitter>
#include <QStatusBar>

#include "attention_heatmap.h"
#include "chat_view.h"
#include "distribution_chart.h"
#include "export_actions.h"
#include "head_grid.h"
#include "head_overview.h"
#include "inference_worker.h"
#include "main_window.h"
#include "sampling_panel.h"
#include "step_view.h"

namespace tokenscope::app {

void MainWindow::build_teaching() {
    step_view_ = new ui::StepView(this);
    auto* heads = new QSplitter(Qt::Vertical, this);
    head_grid_ = new ui::HeadGrid(heads);
    head_overview_ = new ui::HeadOverview(heads);
    heads->addWidget(head_grid_);
    heads->addWidget(head_overview_);
    heads->setStretchFactor(0, 1);
    heads->setStretchFactor(1, 1);
    head_overview_->setMinimumHeight(160);
    auto dock = [this](QWidget* content, const QString& title, const QString& name) {
        auto* d = new QDockWidget(title, this);
        d->setObjectName(name);
        d->setWidget(content);
        d->setAllowedAreas(Qt::AllDockWidgetAreas);
        teaching_docks_.append(d);
        return d;
    };
    // In a scroll area: in a short dock the pipeline scrolls instead of its parts overlapping.
    auto* step_scroll = new QScrollArea(this);
    step_scroll->setWidget(step_view_);
    step_scroll->setWidgetResizable(true);
    step_scroll->setFrameShape(QFrame::NoFrame);
    dock(step_scroll, tr("Step"), "dock.step");
    dock(heads, tr("Heads"), "dock.heads");
    place_teaching_docks();

    auto* tools = new QMenu(tr("&Tools"), menuBar());
    menuBar()->insertMenu(help_menu_ ? help_menu_->menuAction() : nullptr, tools);
    step_action_ = tools->addAction(tr("&Step: one token and pause"), this, &MainWindow::step);
    step_action_->setShortcut(QKeySequence(Qt::Key_F10));
    step_action_->setShortcutContext(Qt::ApplicationShortcut);
    QAction* show_heads = tools->addAction(tr("Every &head of the layer"), this, [this] {
        teaching_docks_[1]->show();
        teaching_docks_[1]->raise();
        give_room(teaching_docks_[1]);
        refresh_head_views();
    });
    show_heads->setShortcut(QKeySequence(tr("Ctrl+Shift+H")));
    tools->addSeparator();
    for (QDockWidget* d : teaching_docks_) tools->addAction(d->toggleViewAction());
    tools->addSeparator();
    build_batch_demo_menu(tools);
    build_quant_lab_menu(tools);

    // Export from the context menus of the heatmap and the sampling chart (the head views and
    // the step view's chart install their own).
    ui::installExportMenu(attention_->viewport(), [this] {
        ui::ExportSource s;
        const ui::AttentionData& a = attention_->data();
        s.base_name =
            QStringLiteral("attention-layer%1-%2")
                .arg(a.layer)
                .arg(a.head < 0 ? QStringLiteral("mean") : QStringLiteral("head%1").arg(a.head));
        // The rendered cells (one per token, or the downsampled image), not the scrolled view.
        s.image = [this] { return attention_->currentImage(); };
        if (!a.rows.isEmpty()) {
            const auto e = ui::attentionExport(a);
            s.svg = [e] { return QString::fromStdString(inspect::attention_grid_svg(e, {})); };
            s.csv = [e] { return QString::fromStdString(inspect::attention_csv(e)); };
            s.json = [e] { return QString::fromStdString(inspect::attention_json(e)); };
        }
        return s;
    });
    ui::installExportMenu(sampling_->chart(), [this] {
        ui::ExportSource s;
        s.base_name = QStringLiteral("candidates");
        const auto* chart = sampling_->chart();
        const auto c = chart->candidates();
        const auto b = chart->rawProbabilities();
        const auto a = chart->shapedProbabilities();
        s.svg = [c, b, a] { return ui::distributionSvg(c, b, a); };
        s.csv = [c, b, a] { return ui::distributionCsv(c, b, a); };
        s.json = [c, b, a] { return ui::distributionJson(c, b, a); };
        return s;
    });

    connect(step_view_, &ui::StepView::stepRequested, this, &MainWindow::step);
    connect(step_view_, &ui::StepView::attentionRequested, this,
            [this](int layer, int first, int rows) {
                QMetaObject::invokeMethod(worker_, "requestStepAttention", Qt::QueuedConnection,
                                          Q_ARG(int, layer), Q_ARG(int, first), Q_ARG(int, rows));
            });
    connect(worker_, &InferenceWorker::stepTaken, this,
            [this](qint64 conversation, const ui::StepData& s) {
                step_queued_ = false;
                if (conversation != generating_conversation_) return;
                step_view_->addStep(s);
                statusBar()->showMessage(
                    tr("Step %1 done: press Step (F10) for the next token, Stop to end")
                        .arg(s.index + 1),
                    5000);
                refresh_head_views();
            });
    connect(worker_, &InferenceWorker::stepAttentionChanged, step_view_,
            &ui::StepView::setStepAttention);
    connect(worker_, &InferenceWorker::headGridChanged, head_grid_, &ui::HeadGrid::setData);
    connect(worker_, &InferenceWorker::headOverviewChanged, head_overview_,
            &ui::HeadOverview::setData);
    connect(worker_, &InferenceWorker::modelLoaded, this, [this](const ui::ModelInfoData& info) {
        step_view_->setModelShape(int(info.layers), int(info.heads));
        step_view_->clear();
        head_grid_->clear();
        head_overview_->setData({});
    });
    connect(this, &MainWindow::generationDone, this, [this] { refresh_head_views(); });
    // The overview and the grid lead to the big heatmap: the head chosen there is shown there.
    connect(head_overview_, &ui::HeadOverview::headChosen, this, [this](int layer, int head) {
        QMetaObject::invokeMethod(worker_, "requestAttention", Qt::QueuedConnection,
                                  Q_ARG(int, layer), Q_ARG(int, head));
        QMetaObject::invokeMethod(worker_, "requestHeadGrid", Qt::QueuedConnection,
                                  Q_ARG(int, layer));
        head_grid_->setEnlargedHead(-1);
        pending_head_ = head;
    });
    connect(head_grid_, &ui::HeadGrid::imagesReady, this, [this] {
        if (pending_head_ >= 0) head_grid_->setEnlargedHead(std::exchange(pending_head_, -1));
    });
    connect(head_grid_, &ui::HeadGrid::headClicked, this, [this](int head) {
        QMetaObject::invokeMethod(worker_, "requestAttention", Qt::QueuedConnection,
                                  Q_ARG(int, head_grid_->data().layer), Q_ARG(int, head));
    });
    connect(attention_, &ui::AttentionHeatmap::selectionChanged, this, [this](int layer, int) {
        if (teaching_docks_[1]->isVisible())
            QMetaObject::invokeMethod(worker_, "requestHeadGrid", Qt::QueuedConnection,
                                      Q_ARG(int, layer));
    });
    connect(teaching_docks_[1], &QDockWidget::visibilityChanged, this, [this](bool visible) {
        if (visible) refresh_head_views();
    });
}

void MainWindow::place_teaching_docks() {
    if (teaching_docks_.isEmpty()) return;
    // Beside the attention heatmap, as more tabs of its group: the same space, one click away.
    QDockWidget* attention = docks_[2];
    for (QDockWidget* d : teaching_docks_) {
        d->setFloating(false);
        removeDockWidget(d);
        addDockWidget(dockWidgetArea(attention), d);
        tabifyDockWidget(attention, d);
        d->show();
    }
    attention->raise();
}

void MainWindow::give_room(QDockWidget* dock) {
    // A teaching view is what the user asked for: a wider share of the window and more of the
    // height than the sampling panel above it. Only when asked (Step starting a reply, the
    // Heads command), so that the user's own resizing of the docks stays.
    if (dock->isFloating()) return;
    resizeDocks({dock}, {std::max(420, width() * 45 / 100)}, Qt::Horizontal);
    QDockWidget* above = docks_[0];
    if (dockWidgetArea(above) == dockWidgetArea(dock) && above->isVisible()) {
        const int h = std::max(300, height() - 90);
        resizeDocks({above, dock}, {h * 22 / 100, h * 78 / 100}, Qt::Vertical);
    }
}

void MainWindow::refresh_head_views() {
    if (!model_ready_ || !teaching_docks_[1]->isVisible()) return;
    const int layer = attention_->data().layer;
    QMetaObject::invokeMethod(worker_, "requestHeadGrid", Qt::QueuedConnection, Q_ARG(int, layer));
    QMetaObject::invokeMethod(worker_, "requestHeadOverview", Qt::QueuedConnection);
}

void MainWindow::step() {
    if (!model_ready_) {
        show_error(tr("No model"), tr("Open a model first (File > Open model…)."));
        return;
    }
    // Show the pipeline where the step's result appears.
    teaching_docks_[0]->show();
    teaching_docks_[0]->raise();
    if (generating_) {
        // Only a step-mode reply pauses between tokens; one step at a time.
        if (!stepping_ || step_queued_) return;
        step_queued_ = true;
        QMetaObject::invokeMethod(worker_, "stepOnce", Qt::QueuedConnection);
        return;
    }
    const QString text = chat_->input()->toPlainText();
    if (text.trimmed().isEmpty()) {
        statusBar()->showMessage(
            tr("Type a message, then press Step (F10) to generate its reply one token at a time."),
            6000);
        return;
    }
    step_view_->clear();
    give_room(teaching_docks_[0]);
    stepping_ = true;
    chat_->input()->clear();
    sendMessage(text);
    if (!generating_) {
        stepping_ = false;  // not sent (e.g. nothing to send)
        return;
    }
    // beginStepping is queued first: this stepOnce runs after it, on the worker's thread.
    step_queued_ = true;
    QMetaObject::invokeMethod(worker_, "stepOnce", Qt::QueuedConnection);
}

}  // namespace tokenscope::app
