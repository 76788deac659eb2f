// The main window's File › Serve this model… and Stop serving: the local model over the
// OpenAI API from inside the app (ModelServer), its address in the status bar while it runs.
#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QFileInfo>
#include <QLabel>
#include <QMenu>
#include <QStatusBar>

#include "main_window.h"

#ifdef TOKENSCOPE_HAVE_SERVER
#include "model_server.h"
#include "serve_dialog.h"
#endif

namespace tokenscope::app {

void MainWindow::build_serve_menu(QMenu* file) {
#ifdef TOKENSCOPE_HAVE_SERVER
    model_server_ = new ModelServer(this);
    serve_action_ = file->addAction(tr("Ser&ve this model…"), this, &MainWindow::showServeDialog);
    serve_action_->setObjectName("serveModel");
    serve_action_->setStatusTip(
        tr("Let other programs use the loaded model through the OpenAI API"));
    stop_serving_action_ = file->addAction(tr("Stop ser&ving"), this, &MainWindow::stopServing);
    stop_serving_action_->setObjectName("stopServing");
    serve_status_ = new QLabel(this);
    serve_status_->setObjectName("serveStatus");
    serve_status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    serve_status_->hide();
    statusBar()->addPermanentWidget(serve_status_);
    connect(model_server_, &ModelServer::started, this, [this](const QString& url) {
        serve_status_->setText(tr("Serving at %1").arg(url));
        serve_status_->setToolTip(
            tr("%1 over the OpenAI API: %2/v1/chat/completions (base URL %2/v1). The address "
               "is on the clipboard.")
                .arg(QFileInfo(model_server_->modelPath()).fileName(), url));
        serve_status_->show();
        QApplication::clipboard()->setText(url + "/v1");
        statusBar()->showMessage(
            tr("Serving at %1 — the base URL %1/v1 is on the clipboard").arg(url), 8000);
        update_serve_actions();
    });
    connect(model_server_, &ModelServer::failed, this, [this](const QString& message) {
        serve_status_->hide();
        update_serve_actions();
        show_error(tr("Cannot serve the model"), message);
    });
    connect(model_server_, &ModelServer::stopped, this, [this] {
        serve_status_->hide();
        statusBar()->showMessage(tr("The server stopped"), 4000);
        update_serve_actions();
    });
    connect(this, &MainWindow::modelReadyChanged, this, &MainWindow::update_serve_actions);
    update_serve_actions();
#else
    (void)file;
#endif
}

void MainWindow::update_serve_actions() {
#ifdef TOKENSCOPE_HAVE_SERVER
    const auto state = model_server_->state();
    const bool can_serve = model_ready_ && !remote_ && !model_path_.isEmpty();
    serve_action_->setEnabled(can_serve && state == ModelServer::State::Stopped);
    serve_action_->setToolTip(can_serve ? QString()
                                        : tr("Load a local model first (a server's model is "
                                             "served where it runs)"));
    stop_serving_action_->setEnabled(state == ModelServer::State::Running);
    if (state == ModelServer::State::Starting) {
        serve_status_->setText(tr("Starting the server…"));
        serve_status_->show();
    }
#endif
}

void MainWindow::showServeDialog() {
#ifdef TOKENSCOPE_HAVE_SERVER
    auto* dialog = new ServeDialog(QFileInfo(model_path_).fileName(), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [this, dialog] {
        dialog->remember();
        serveModel(dialog->settings());
    });
    dialog->open();
#endif
}

void MainWindow::serveModel(const ServeSettings& settings) {
#ifdef TOKENSCOPE_HAVE_SERVER
    if (model_path_.isEmpty() || remote_) return;
    model_server_->start(model_path_, load_options(), settings);
    update_serve_actions();
#else
    (void)settings;
#endif
}

void MainWindow::stopServing() {
#ifdef TOKENSCOPE_HAVE_SERVER
    model_server_->stop();
    update_serve_actions();
#endif
}

}  // namespace tokenscope::app
