// Tools › Quantization lab… — the window (quant_lab_window.h) opened on the current model, and
// its "Open as current model" loading a quantized file in the chat.
#include <QMenu>

#include "main_window.h"
#include "quant_lab_window.h"

namespace tokenscope::app {

void MainWindow::build_quant_lab_menu(QMenu* tools) {
    QAction* lab =
        tools->addAction(tr("&Quantization lab…"), this, &MainWindow::showQuantizationLab);
    lab->setShortcut(QKeySequence(tr("Ctrl+Shift+Q")));
    lab->setStatusTip(tr("Quantize the model to smaller types and measure what each costs"));
}

void MainWindow::showQuantizationLab() {
    if (!quant_lab_) {
        quant_lab_ = new QuantLabWindow(this);
        connect(quant_lab_, &QuantLabWindow::openModelRequested, this, &MainWindow::openModel);
    }
    quant_lab_->setModel(model_info_data_, load_options().kv_capacity_tokens);
    quant_lab_->show();
    quant_lab_->raise();
    quant_lab_->activateWindow();
}

}  // namespace tokenscope::app
