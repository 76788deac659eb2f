// Tools › Batch demo… — the scheduler timeline window (batch_demo_window.h) on the current
// local model.
#include <QMenu>

#include "batch_demo_window.h"
#include "main_window.h"

namespace tokenscope::app {

void MainWindow::build_batch_demo_menu(QMenu* tools) {
    QAction* demo =
        tools->addAction(tr("&Batch demo: continuous batching…"), this, &MainWindow::showBatchDemo);
    demo->setShortcut(QKeySequence(tr("Ctrl+Shift+B")));
    demo->setStatusTip(tr("Several prompts through one engine at once, step by step"));
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
