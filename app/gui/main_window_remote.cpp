// The main window's remote mode: File › Connect to server… and Back to local model, the
// remembered server (QSettings "remote/url", "remote/model", and the key only when the user
// asks), and the panels that need the local engine's internals saying plainly what a server
// does not expose.
#include <QAction>
#include <QMenu>
#include <QSettings>
#include <QStatusBar>

#include "attention_heatmap.h"
#include "main_window.h"
#include "sampling_panel.h"
#include "speculation_controls.h"

#ifdef TOKENSCOPE_HAVE_REMOTE
#include "connect_dialog.h"
#endif

namespace tokenscope::app {

void MainWindow::build_remote_menu(QMenu* file) {
#ifdef TOKENSCOPE_HAVE_REMOTE
    QAction* connect_action =
        file->addAction(tr("Connect to &server…"), this, &MainWindow::connectToServer);
    connect_action->setObjectName("connectToServer");
    connect_action->setStatusTip(
        tr("Chat with a model on vLLM, SGLang, llama-server, Ollama or tokenscope-cli serve"));
    local_action_ = file->addAction(tr("&Back to local model"), this, &MainWindow::useLocalModel);
    local_action_->setObjectName("backToLocal");
    local_action_->setEnabled(false);
#else
    (void)file;
#endif
}

void MainWindow::connectToServer() {
#ifdef TOKENSCOPE_HAVE_REMOTE
    QSettings settings;
    RemoteSettings initial;
    initial.url = settings.value("remote/url").toString();
    initial.model = settings.value("remote/model").toString();
    initial.api_key = settings.value("remote/api_key").toString();
    const bool remember_key = settings.contains("remote/api_key");
    auto* dialog = new ConnectDialog(initial, remember_key, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [this, dialog] {
        QSettings s;
        if (dialog->rememberKey())
            s.setValue("remote/api_key", dialog->settings().api_key);
        else
            s.remove("remote/api_key");
        connectRemote(dialog->settings());
    });
    dialog->open();  // window-modal, not blocking: the worker's signals keep arriving
#endif
}

void MainWindow::connectRemote(const RemoteSettings& settings) {
    if (generating_) stopGeneration();
    remote_settings_ = settings;  // the server timeline polls the same server
    QSettings s;
    s.setValue("remote/url", settings.url);
    s.setValue("remote/model", settings.model);
    QMetaObject::invokeMethod(worker_, "connectRemote", Qt::QueuedConnection,
                              Q_ARG(tokenscope::app::RemoteSettings, settings));
}

void MainWindow::useLocalModel() {
    if (!model_path_.isEmpty()) {
        openModel(model_path_);
        return;
    }
    const QStringList recent = QSettings().value("models/recent").toStringList();
    if (!recent.isEmpty()) {
        openModel(recent.first());
        return;
    }
    statusBar()->showMessage(tr("Open a local model with File › Open model…"), 5000);
}

void MainWindow::apply_remote_mode(const ui::ModelInfoData& info) {
    remote_ = info.remote;
    remote_internals_ = info.remote_internals;
    if (local_action_) local_action_->setEnabled(remote_);
    // Speculative decoding is the local engine's; a server decides its own (vLLM: its
    // --speculative-config), which the OpenAI API does not show.
    auto* speculation = sampling_->speculationControls();
    speculation->setEnabled(!remote_);
    speculation->setToolTip(remote_ ? tr("Speculative decoding is set on the server, not here; "
                                         "the OpenAI API does not expose it.")
                                    : QString());
    attention_->clear(attention_placeholder());
}

QString MainWindow::attention_placeholder() const {
    if (!remote_)
        return tr("No attention captured for this conversation yet: send a message to see it.");
    return remote_internals_
               ? tr("No attention yet: tokenscope-cli serve sends a reply's attention "
                    "(its first 512 tokens) when the reply is done.")
               : tr("This server does not expose attention weights: the OpenAI API carries "
                    "tokens and logprobs only. Open the model locally to see them.");
}

}  // namespace tokenscope::app
