// Tools › Batch demo… — the scheduler timeline window (batch_demo_window.h) on the current
// local model — and Tools › Server timeline… (server_timeline_window.h), the same timeline for
// the requests of the server the app runs or is connected to.
#include <QFileInfo>
#include <QMenu>

#include "batch_demo_window.h"
#include "main_window.h"

#ifdef TOKENSCOPE_HAVE_REMOTE
#include "server_timeline_window.h"
#endif
#ifdef TOKENSCOPE_HAVE_SERVER
#include "model_server.h"
#endif

namespace tokenscope::app {

void MainWindow::build_batch_demo_menu(QMenu* tools) {
    QAction* demo =
        tools->addAction(tr("&Batch demo: continuous batching…"), this, &MainWindow::showBatchDemo);
    demo->setShortcut(QKeySequence(tr("Ctrl+Shift+B")));
    demo->setStatusTip(tr("Several prompts through one engine at once, step by step"));
#ifdef TOKENSCOPE_HAVE_REMOTE
    QAction* timeline =
        tools->addAction(tr("Server &timeline…"), this, &MainWindow::showServerTimeline);
    timeline->setShortcut(QKeySequence(tr("Ctrl+Shift+T")));
    timeline->setStatusTip(
        tr("The continuous batching of the requests a tokenscope server runs, live"));
#endif
}

void MainWindow::showServerTimeline() {
#ifdef TOKENSCOPE_HAVE_REMOTE
    if (!server_timeline_) server_timeline_ = new ServerTimelineWindow(this);
    // This app's own server first (File › Serve this model), else the server it chats with.
    QString url, key, what;
#ifdef TOKENSCOPE_HAVE_SERVER
    if (model_server_ && model_server_->running()) {
        url = model_server_->url();
        key = model_server_->apiKey();
        what = tr("This app serving %1").arg(QFileInfo(model_server_->modelPath()).fileName());
    }
#endif
    if (url.isEmpty() && remote_) {
        url = remote_settings_.url;
        key = remote_settings_.api_key;
        what = tr("The connected server");
    }
    if (url != server_timeline_->url() || url.isEmpty()) server_timeline_->watch(url, key, what);
    server_timeline_->show();
    server_timeline_->raise();
    server_timeline_->activateWindow();
#endif
}

void MainWindow::showBatchDemo() {
    if (!batch_demo_) batch_demo_ = new BatchDemoWindow(this);
    // A server's scheduler is not visible through the OpenAI API: the demo needs a local file.
    batch_demo_->setModelPath(remote_ ? QString() : model_path_);
    batch_demo_->show();
    batch_demo_->raise();
    batch_demo_->activateWindow();
}

}  // namespace tokenscope::app
