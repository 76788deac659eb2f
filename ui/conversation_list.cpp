#include "conversation_list.h"

#include <QAction>
#include <QEvent>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QMenu>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStandardItemModel>
#include <QStyle>
#include <QVBoxLayout>

namespace tokenscope::ui {

namespace {
constexpr int kIdRole = Qt::UserRole + 1;
constexpr int kTitleRole = Qt::UserRole + 2;  // the title as the store has it (before an edit)
}  // namespace

// Title substring, or one of the ids whose messages matched in the owner's store.
class ConversationList::Filter : public QSortFilterProxyModel {
  public:
    using QSortFilterProxyModel::QSortFilterProxyModel;
    void setText(const QString& text) {
        text_ = text;
        content_matches_.clear();
        invalidateFilter();
    }
    void setContentMatches(const QSet<qint64>& ids) {
        content_matches_ = ids;
        invalidateFilter();
    }
    const QString& text() const { return text_; }

  protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override {
        if (text_.isEmpty()) return true;
        const QModelIndex index = sourceModel()->index(row, 0, parent);
        if (index.data(Qt::DisplayRole).toString().contains(text_, Qt::CaseInsensitive))
            return true;
        return content_matches_.contains(index.data(kIdRole).toLongLong());
    }

  private:
    QString text_;
    QSet<qint64> content_matches_;
};

ConversationList::ConversationList(QWidget* parent)
    : QWidget(parent), model_(new QStandardItemModel(this)), proxy_(new Filter(this)) {
    proxy_->setSourceModel(model_);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->setSpacing(6);

    search_ = new QLineEdit(this);
    search_->setPlaceholderText(tr("Search conversations"));
    search_->setClearButtonEnabled(true);
    search_->setAccessibleName(tr("Search conversations"));
    search_->installEventFilter(this);
    layout->addWidget(search_);

    view_ = new QListView(this);
    view_->setObjectName(QStringLiteral("conversationView"));
    view_->setModel(proxy_);
    view_->setUniformItemSizes(true);
    view_->setSelectionMode(QAbstractItemView::SingleSelection);
    view_->setEditTriggers(QAbstractItemView::EditKeyPressed);  // F2; double-click opens
    view_->setTextElideMode(Qt::ElideRight);
    view_->setContextMenuPolicy(Qt::CustomContextMenu);
    view_->setAccessibleName(tr("Conversations"));
    view_->installEventFilter(this);
    layout->addWidget(view_, 1);

    empty_ = new QLabel(this);
    empty_->setObjectName(QStringLiteral("noMatches"));
    empty_->setWordWrap(true);
    empty_->setAlignment(Qt::AlignCenter);
    empty_->setEnabled(false);  // the dimmed text colour of the style
    empty_->hide();
    layout->addWidget(empty_);

    auto* buttons = new QHBoxLayout;
    buttons->setSpacing(4);
    new_ = new QPushButton(tr("&New"), this);
    new_->setToolTip(tr("New conversation (Ctrl+N)"));
    rename_ = new QPushButton(tr("Rena&me"), this);
    rename_->setToolTip(tr("Rename (F2)"));
    delete_ = new QPushButton(tr("&Delete"), this);
    delete_->setToolTip(tr("Delete (Del)"));
    buttons->addWidget(new_);
    buttons->addStretch(1);
    buttons->addWidget(rename_);
    buttons->addWidget(delete_);
    layout->addLayout(buttons);

    connect(new_, &QPushButton::clicked, this, &ConversationList::newRequested);
    connect(rename_, &QPushButton::clicked, this, &ConversationList::renameCurrent);
    connect(delete_, &QPushButton::clicked, this, &ConversationList::deleteCurrent);
    connect(search_, &QLineEdit::textChanged, this, &ConversationList::setFilterText);
    connect(view_->selectionModel(), &QItemSelectionModel::currentChanged, this,
            [this](const QModelIndex& current) { onCurrentChanged(current); });
    connect(model_, &QStandardItemModel::itemChanged, this, [this](QStandardItem* item) {
        if (updating_ > 0) return;
        const QString title = item->text().trimmed();
        const QString before = item->data(kTitleRole).toString();
        if (title.isEmpty()) {
            // An empty title is not a rename: put the old one back.
            ++updating_;
            item->setText(before);
            --updating_;
            return;
        }
        if (title == before) return;
        ++updating_;
        item->setData(title, kTitleRole);
        --updating_;
        // Queued: this runs inside the delegate's setModelData(), and the owner's refresh
        // (setConversations) must not replace the item under it.
        const qint64 id = item->data(kIdRole).toLongLong();
        QMetaObject::invokeMethod(
            this, [this, id, title] { emit renameRequested(id, title); }, Qt::QueuedConnection);
    });
    connect(view_, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
        auto* menu = new QMenu(this);
        menu->setAttribute(Qt::WA_DeleteOnClose);
        menu->addAction(tr("New conversation"), this, &ConversationList::newRequested);
        if (view_->indexAt(pos).isValid()) {
            menu->addAction(tr("Rename"), this, &ConversationList::renameCurrent);
            menu->addAction(tr("Delete"), this, &ConversationList::deleteCurrent);
        }
        menu->popup(view_->viewport()->mapToGlobal(pos));
    });
    updateButtons();
}

void ConversationList::setToolTips(const QHash<qint64, QString>& tips) {
    for (int r = 0; r < model_->rowCount(); ++r) {
        QStandardItem* item = model_->item(r);
        item->setToolTip(tips.value(item->data(kIdRole).toLongLong()));
    }
}

void ConversationList::setConversations(const QVector<QPair<qint64, QString>>& conversations) {
    ++updating_;
    // The same conversations in the same order (a rename, a reply that did not reorder): the
    // items are updated in place, so an open editor and the scroll position survive.
    bool same = model_->rowCount() == conversations.size();
    for (int r = 0; same && r < conversations.size(); ++r)
        same = model_->item(r)->data(kIdRole).toLongLong() == conversations[r].first;
    if (same) {
        for (int r = 0; r < conversations.size(); ++r) {
            QStandardItem* item = model_->item(r);
            const QString title =
                conversations[r].second.isEmpty() ? tr("Untitled") : conversations[r].second;
            if (item->data(kTitleRole).toString() == title) continue;
            item->setText(title);
            item->setData(title, kTitleRole);
            item->setToolTip(title);
        }
        --updating_;
        setCurrent(current_id_);
        updateEmptyLabel();
        return;
    }
    model_->clear();
    for (const auto& [id, title] : conversations) {
        auto* item = new QStandardItem(title.isEmpty() ? tr("Untitled") : title);
        item->setData(id, kIdRole);
        item->setData(item->text(), kTitleRole);
        item->setToolTip(item->text());
        item->setEditable(true);
        // Roomier rows than the default: easier to hit, easier to scan.
        item->setSizeHint(QSize(0, view_->fontMetrics().height() + 10));
        model_->appendRow(item);
    }
    --updating_;
    setCurrent(current_id_);
    updateEmptyLabel();
}

void ConversationList::setCurrent(qint64 id) {
    current_id_ = id;
    ++updating_;
    QModelIndex found;
    for (int r = 0; r < proxy_->rowCount(); ++r) {
        const QModelIndex index = proxy_->index(r, 0);
        if (index.data(kIdRole).toLongLong() == id) {
            found = index;
            break;
        }
    }
    if (found.isValid()) {
        view_->selectionModel()->setCurrentIndex(found, QItemSelectionModel::ClearAndSelect);
        view_->scrollTo(found);
    } else {
        view_->selectionModel()->clear();
    }
    --updating_;
    updateButtons();
}

qint64 ConversationList::current() const {
    return current_id_;
}

QVector<qint64> ConversationList::visibleIds() const {
    QVector<qint64> ids;
    for (int r = 0; r < proxy_->rowCount(); ++r)
        ids.push_back(proxy_->index(r, 0).data(kIdRole).toLongLong());
    return ids;
}

void ConversationList::setFilterText(const QString& text) {
    if (search_->text() != text) {
        const QSignalBlocker block(search_);
        search_->setText(text);
    }
    // Filtering removes rows, which moves the view's current index; that is not the user
    // choosing a conversation, so no signal, and the real current one is re-selected if shown.
    ++updating_;
    proxy_->setText(text.trimmed());
    --updating_;
    setCurrent(current_id_);
    updateEmptyLabel();
    emit filterTextChanged(text.trimmed());
}

QString ConversationList::filterText() const {
    return proxy_->text();
}

void ConversationList::setContentMatches(const QSet<qint64>& ids) {
    ++updating_;
    proxy_->setContentMatches(ids);
    --updating_;
    setCurrent(current_id_);
    updateEmptyLabel();
}

void ConversationList::updateEmptyLabel() {
    const bool none = !proxy_->text().isEmpty() && proxy_->rowCount() == 0;
    if (none) empty_->setText(tr("No conversations match “%1”").arg(proxy_->text()));
    empty_->setVisible(none);
}

void ConversationList::onCurrentChanged(const QModelIndex& current) {
    if (updating_ > 0 || !current.isValid()) return;
    current_id_ = current.data(kIdRole).toLongLong();
    updateButtons();
    emit conversationSelected(current_id_);
}

void ConversationList::renameCurrent() {
    const QModelIndex index = view_->currentIndex();
    if (!index.isValid()) return;
    view_->setFocus();
    view_->edit(index);
}

void ConversationList::deleteCurrent() {
    const QModelIndex index = view_->currentIndex();
    if (!index.isValid()) return;
    emit deleteRequested(index.data(kIdRole).toLongLong());
}

void ConversationList::updateButtons() {
    const bool has = view_->currentIndex().isValid();
    rename_->setEnabled(has);
    delete_->setEnabled(has);
}

bool ConversationList::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() == QEvent::KeyPress) {
        auto* key = static_cast<QKeyEvent*>(event);
        if (watched == search_ && key->key() == Qt::Key_Down && proxy_->rowCount() > 0) {
            view_->setFocus();
            if (!view_->currentIndex().isValid()) view_->setCurrentIndex(proxy_->index(0, 0));
            return true;
        }
        // Keys typed into the rename editor go to the editor, not here.
        if (watched == view_ && key->key() == Qt::Key_Delete) {
            deleteCurrent();
            return true;
        }
    }
    return QWidget::eventFilter(watched, event);
}

}  // namespace tokenscope::ui
