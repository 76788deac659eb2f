#pragma once
// The conversations of the store: a filterable list with New, Rename and Delete. The widget
// only asks (signals); the owner changes the store and calls setConversations() again.
//
// Keyboard: type in the search box to filter (case-insensitive substring), Down moves into the
// list, F2 renames in place, Delete asks to delete, Ctrl+N asks for a new conversation.
#include <QPair>
#include <QVector>
#include <QWidget>

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
    // Selects a conversation without emitting conversationSelected (-1: none).
    void setCurrent(qint64 id);
    qint64 current() const;

    // Ids currently shown (after the filter), top to bottom.
    QVector<qint64> visibleIds() const;
    void setFilterText(const QString& text);

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

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

  private:
    void onCurrentChanged(const QModelIndex& current);
    void updateButtons();

    QStandardItemModel* model_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QLineEdit* search_ = nullptr;
    QListView* view_ = nullptr;
    QPushButton* new_ = nullptr;
    QPushButton* rename_ = nullptr;
    QPushButton* delete_ = nullptr;
    qint64 current_id_ = -1;
    int updating_ = 0;  // > 0 while the widget itself changes the model or selection
};

}  // namespace tokenscope::ui
