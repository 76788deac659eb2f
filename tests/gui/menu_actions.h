#pragma once
// Finding a menu entry the way a user reads the menu bar: the first action, in any menu of the
// bar, whose text contains `text` (mnemonic ampersands included in the text searched).
#include <QAction>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>

namespace tokenscope::test {

inline QAction* find_menu_action(QMainWindow& window, const QString& text) {
    for (QAction* menu : window.menuBar()->actions()) {
        if (!menu->menu()) continue;
        for (QAction* a : menu->menu()->actions()) {
            if (a->text().contains(text)) return a;
        }
    }
    return nullptr;
}

}  // namespace tokenscope::test
