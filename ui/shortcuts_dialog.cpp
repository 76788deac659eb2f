#include "shortcuts_dialog.h"

#include <QAction>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QTableWidget>
#include <QVBoxLayout>

namespace tokenscope::ui {

namespace {

// "&Open model…" -> "Open model"; "&&" stays a literal "&".
QString plainMenuText(QString text) {
    text.replace(QStringLiteral("&&"), QStringLiteral("\x01"));
    text.remove(QLatin1Char('&'));
    text.replace(QStringLiteral("\x01"), QStringLiteral("&"));
    if (text.endsWith(QChar(0x2026))) text.chop(1);
    if (text.endsWith(QStringLiteral("..."))) text.chop(3);
    return text.trimmed();
}

void collect(const QMenu* menu, const QString& path, QVector<ShortcutEntry>& out) {
    for (QAction* a : menu->actions()) {
        if (a->isSeparator()) continue;
        const QString here = path + QStringLiteral(" \u203A ") + plainMenuText(a->text());
        if (a->menu()) {
            collect(a->menu(), here, out);
            continue;
        }
        const QList<QKeySequence> keys = a->shortcuts();
        if (keys.isEmpty()) continue;
        QStringList texts;
        for (const QKeySequence& k : keys) texts << k.toString(QKeySequence::NativeText);
        out.push_back({here, texts.join(QStringLiteral(", "))});
    }
}

}  // namespace

QVector<ShortcutEntry> menuShortcuts(const QMenuBar* bar) {
    QVector<ShortcutEntry> out;
    if (!bar) return out;
    for (QAction* a : bar->actions()) {
        if (a->menu()) collect(a->menu(), plainMenuText(a->text()), out);
    }
    return out;
}

QVector<ShortcutEntry> chatShortcuts() {
    const QString chat = QObject::tr("Chat");
    return {
        {chat + QStringLiteral(" \u203A ") + QObject::tr("Send the message"),
         QKeySequence(Qt::Key_Return).toString(QKeySequence::NativeText)},
        {chat + QStringLiteral(" \u203A ") + QObject::tr("New line in the message"),
         QKeySequence(Qt::SHIFT | Qt::Key_Return).toString(QKeySequence::NativeText)},
        {chat + QStringLiteral(" \u203A ") + QObject::tr("Stop generating, or cancel an edit"),
         QKeySequence(Qt::Key_Escape).toString(QKeySequence::NativeText)},
        {chat + QStringLiteral(" \u203A ") +
             QObject::tr("Unfold or fold a reply's reasoning (text cursor on its header)"),
         QKeySequence(Qt::Key_Return).toString(QKeySequence::NativeText)},
    };
}

ShortcutsDialog::ShortcutsDialog(const QMenuBar* bar, QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Keyboard shortcuts"));
    auto* layout = new QVBoxLayout(this);
    filter_ = new QLineEdit(this);
    filter_->setPlaceholderText(tr("Filter by action or key"));
    filter_->setClearButtonEnabled(true);
    layout->addWidget(filter_);

    QVector<ShortcutEntry> rows = menuShortcuts(bar);
    rows += chatShortcuts();
    table_ = new QTableWidget(static_cast<int>(rows.size()), 2, this);
    table_->setHorizontalHeaderLabels({tr("Action"), tr("Shortcut")});
    table_->verticalHeader()->hide();
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setAlternatingRowColors(true);
    for (int i = 0; i < rows.size(); ++i) {
        table_->setItem(i, 0, new QTableWidgetItem(rows[i].where));
        table_->setItem(i, 1, new QTableWidgetItem(rows[i].keys));
    }
    table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
    table_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
    layout->addWidget(table_);

    auto* note = new QLabel(tr("Right-click a message for Regenerate and Edit; click a generated "
                               "token to inspect it."),
                            this);
    note->setWordWrap(true);
    layout->addWidget(note);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    connect(filter_, &QLineEdit::textChanged, this, &ShortcutsDialog::applyFilter);
    resize(560, 420);
}

void ShortcutsDialog::applyFilter(const QString& text) {
    for (int r = 0; r < table_->rowCount(); ++r) {
        const bool match = text.isEmpty() ||
                           table_->item(r, 0)->text().contains(text, Qt::CaseInsensitive) ||
                           table_->item(r, 1)->text().contains(text, Qt::CaseInsensitive);
        table_->setRowHidden(r, !match);
    }
}

int ShortcutsDialog::visibleRows() const {
    int n = 0;
    for (int r = 0; r < table_->rowCount(); ++r) n += table_->isRowHidden(r) ? 0 : 1;
    return n;
}

}  // namespace tokenscope::ui
