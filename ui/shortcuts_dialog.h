#pragma once
// Help › Keyboard shortcuts: every menu action that has a shortcut (read from the menu bar when
// the dialog opens, so actions added later are listed too), then the keys the chat handles
// itself (ChatView, ChatInput). A filter box narrows the list; the table is read-only.
#include <QDialog>
#include <QString>
#include <QVector>

class QLineEdit;
class QMenuBar;
class QTableWidget;

namespace tokenscope::ui {

struct ShortcutEntry {
    QString where;  // "File › Open model" (menu path; mnemonics and ellipses removed)
    QString keys;   // QKeySequence::NativeText, several sequences joined by ", "
};

// Menu actions with at least one shortcut, in menu order (submenus included, separators and
// actions without a shortcut skipped).
QVector<ShortcutEntry> menuShortcuts(const QMenuBar* bar);
// The keys the chat handles without a menu action.
QVector<ShortcutEntry> chatShortcuts();

class ShortcutsDialog : public QDialog {
    Q_OBJECT
  public:
    explicit ShortcutsDialog(const QMenuBar* bar, QWidget* parent = nullptr);
    QTableWidget* table() const { return table_; }
    QLineEdit* filterBox() const { return filter_; }
    // Rows left visible by the filter, for tests.
    int visibleRows() const;

  private:
    void applyFilter(const QString& text);

    QTableWidget* table_;
    QLineEdit* filter_;
};

}  // namespace tokenscope::ui
