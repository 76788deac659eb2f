#pragma once
// What the Tools-window suites need of the main window: one opened on a model with a scratch
// database (1 engine thread, a 1024-token cache, as the other window suites use), and a menu
// entry found the way a user reads the menu bar.
#include <QAction>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>
#include <QTest>
#include <memory>

#include "main_window.h"

namespace tokenscope::test {

// The first action, in any menu of the bar, whose text contains `text`.
inline QAction* find_menu_action(QMainWindow& window, const QString& text) {
    for (QAction* menu : window.menuBar()->actions()) {
        if (!menu->menu()) continue;
        for (QAction* a : menu->menu()->actions()) {
            if (a->text().contains(text)) return a;
        }
    }
    return nullptr;
}

// Shown, and given up to 30 s to load `model` (check modelReady()).
inline std::unique_ptr<app::MainWindow> open_main_window(const QString& model,
                                                         const QString& store_path) {
    app::MainWindowOptions o;
    o.model_path = model;
    o.store = store_path.toStdString();
    o.load.threads = 1;
    o.load.kv_capacity_tokens = 1024;
    auto window = std::make_unique<app::MainWindow>(o);
    window->show();
    for (int i = 0; i < 600 && !window->modelReady(); ++i) QTest::qWait(50);
    return window;
}

}  // namespace tokenscope::test
