// The main window's Edit › Settings… (settings_dialog.h): saving, the offer to reload the model
// when a setting that applies at load changed, the models folder and the start-up preset.
#include <QAction>
#include <QFileInfo>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>

#include "main_window.h"
#include "sampling_panel.h"
#include "settings_dialog.h"
#include "util/paths.h"

namespace tokenscope::app {

void MainWindow::build_settings_action(QMenu* edit) {
    QAction* settings = edit->addAction(tr("&Settings…"), this, &MainWindow::showSettings);
    settings->setShortcut(QKeySequence(tr("Ctrl+,")));
    settings->setMenuRole(QAction::PreferencesRole);
    edit->addSeparator();
    // The preset a session starts with (the sampling panel's own default otherwise).
    if (QSettings().contains("sampling/preset")) {
        const QString preset = current_settings().preset;
        sampling_->applyPreset(preset == "precise"    ? ui::SamplingPanel::Preset::Precise
                               : preset == "creative" ? ui::SamplingPanel::Preset::Creative
                                                      : ui::SamplingPanel::Preset::Balanced);
    }
}

AppSettings MainWindow::current_settings() const {
    AppSettings defaults;
    defaults.threads = options_.load.threads;
    defaults.context = options_.load.kv_capacity_tokens;
    defaults.kv_type = options_.load.kv_type;
    defaults.device = options_.load.device;
    defaults.chat_template = options_.load.chat_template;
    return AppSettings::load(defaults);
}

QString MainWindow::models_folder() const {
    const QString chosen = current_settings().models_folder;
    return chosen.isEmpty() ? QString::fromStdString(paths::models_dir().string()) : chosen;
}

void MainWindow::showSettings() {
    const AppSettings before = current_settings();
    auto* dialog =
        new SettingsDialog(before, QString::fromStdString(paths::models_dir().string()), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [this, dialog, before] {
        const AppSettings after = dialog->settings();
        after.save();
        if (after.models_folder != before.models_folder) scan_models_folder();
        if (!after.needsReload(before) || remote_ || model_path_.isEmpty()) return;
        auto* ask = new QMessageBox(QMessageBox::Question, tr("Reload the model?"),
                                    tr("Threads, context size, KV cache type, device and chat "
                                       "template apply when a model loads. Reload %1 now?")
                                        .arg(QFileInfo(model_path_).fileName()),
                                    QMessageBox::NoButton, this);
        ask->setObjectName("reloadPrompt");
        ask->setAttribute(Qt::WA_DeleteOnClose);
        QPushButton* reload = ask->addButton(tr("&Reload now"), QMessageBox::AcceptRole);
        ask->addButton(tr("&Later"), QMessageBox::RejectRole);
        connect(reload, &QPushButton::clicked, this, [this] { openModel(model_path_); });
        ask->open();
    });
    dialog->open();
}

}  // namespace tokenscope::app
