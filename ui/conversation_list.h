#pragma once
// The conversations of the store: a filterable list with New, Rename and Delete. The widget
// only asks (signals); the owner changes the store and calls setConversations() again.
//
// Search: a conversation is shown when its title contains the search text (case-insensitive)
// or when the owner says its messages do: filterTextChanged() asks, setContentMatches()
// answers. "No conversations match" is shown when nothing does.
//
// Renaming: the request leaves through a queued call, after the item view's delegate has
// finished committing the edit. The owner refreshes the list in response, and doing that
// inside the delegate's setData() would free the item the delegate is still writing to.
//
// Keyboard: type in the search box to filter, Down moves into the list, F2 renames in place,
// Delete asks to delete. Ctrl+N belongs to the window's File menu (one owner per shortcut).
#include <QHash>
#include <QPair>
#include <QSet>
#include <QVector>
#include <QWidget>

class QLabel;
class QLineEdit;
class QListView;
class QPushButton;
class QSortFilterProxyModel;
class QStandardItemModel;
class QModelIndex;

namespace tokenscope::ui {

class ConversationList : public QWidget {
    Q_OBJECT
  public:
    explicit ConversationList(QWidget* parent = nullptr);

    void setConversations(const QVector<QPair<qint64, QString>>& conversations);
    // Hover text per conversation id (what answered it, when); ids not in `tips` get none.
    void setToolTips(const QHash<qint64, QString>& tips);
    // Selects a conversation without emitting conversationSelected (-1: none).
    void setCurrent(qint64 id);
    qint64 current() const;

    // Ids currently shown (after the filter), top to bottom.
    QVector<qint64> visibleIds() const;
    void setFilterText(const QString& text);
    QString filterText() const;
    // Conversations whose message text matches the current filter (from the owner's store).
    void setContentMatches(const QSet<qint64>& ids);
    // The "No conversations match" line (visible only when the filter hides everything).
    QLabel* emptyLabel() const { return empty_; }

    QLineEdit* searchBox() const { return search_; }
    QListView* listView() const { return view_; }
    QPushButton* newButton() const { return new_; }
    QPushButton* renameButton() const { return rename_; }
    QPushButton* deleteButton() const { return delete_; }

  public slots:
    // Starts in-place renaming of the current conversation; finishing it emits renameRequested.
    void renameCurrent();
    void deleteCurrent();

  signals:
    void conversationSelected(qint64 id);
    void newRequested();
    void renameRequested(qint64 id, const QString& title);
    void deleteRequested(qint64 id);
    // The search text changed: the owner may answer with setContentMatches().
    void filterTextChanged(const QString& text);

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

  private:
    void onCurrentChanged(const QModelIndex& current);
    void updateButtons();
    void updateEmptyLabel();

    QStandardItemModel* model_ = nullptr;
    class Filter;
    Filter* proxy_ = nullptr;
    QLabel* empty_ = nullptr;
    QLineEdit* search_ = nullptr;
    QListView* view_ = nullptr;
    QPushButton* new_ = nullptr;
    QPushButton* rename_ = nullptr;
    QPushButton* delete_ = nullptr;
    qint64 current_id_ = -1;
    int updating_ = 0;  // > 0 while the widget itself changes the model or selection
};

}  // namespace tokenscope::ui
