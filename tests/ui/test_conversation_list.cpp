// ConversationList: filtering, selection and the request signals; TokenInspector contents.
#include <QAbstractItemView>
#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>

#include "conversation_list.h"
#include "message_document.h"
#include "panel_data.h"
#include "token_inspector.h"

using namespace tokenscope::ui;

namespace {
const QString kShotDir = QStringLiteral("/tmp/tokenscope-panels");

QVector<QPair<qint64, QString>> sample() {
    return {{1, QStringLiteral("Rust lifetimes explained")},
            {2, QStringLiteral("Sourdough schedule")},
            {3, QStringLiteral("KV cache sizing for Gemma")},
            {4, QStringLiteral("Why is my cache slow?")},
            {5, QStringLiteral("Haiku about tokens")}};
}
}  // namespace

class TestConversationList : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        register_panel_types();
        QDir().mkpath(kShotDir);
    }

    void searchFilters() {
        ConversationList list;
        list.setConversations(sample());
        QCOMPARE(list.visibleIds(), (QVector<qint64>{1, 2, 3, 4, 5}));
        QTest::keyClicks(list.searchBox(), QStringLiteral("CACHE"));
        QCOMPARE(list.visibleIds(), (QVector<qint64>{3, 4}));
        list.setFilterText(QStringLiteral("nothing like this"));
        QVERIFY(list.visibleIds().isEmpty());
        list.searchBox()->clear();
        QCOMPARE(list.visibleIds().size(), 5);
    }

    void signalsFire() {
        ConversationList list;
        list.show();
        QVERIFY(QTest::qWaitForWindowExposed(&list));
        QSignalSpy selected(&list, &ConversationList::conversationSelected);
        QSignalSpy created(&list, &ConversationList::newRequested);
        QSignalSpy renamed(&list, &ConversationList::renameRequested);
        QSignalSpy deleted(&list, &ConversationList::deleteRequested);
        list.setConversations(sample());

        // Programmatic selection is silent; a user's is not.
        list.setCurrent(2);
        QCOMPARE(list.current(), qint64(2));
        QCOMPARE(selected.count(), 0);
        QVERIFY(list.renameButton()->isEnabled());
        QListView* view = list.listView();
        const QRect row3 = view->visualRect(view->model()->index(2, 0));
        QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, row3.center());
        QCOMPARE(selected.count(), 1);
        QCOMPARE(selected.at(0).at(0).toLongLong(), qint64(3));

        // Filtering away the current one does not "select" anything else.
        list.setFilterText(QStringLiteral("sour"));
        QCOMPARE(selected.count(), 1);
        list.setFilterText(QString());
        QCOMPARE(list.current(), qint64(3));
        QCOMPARE(view->currentIndex().row(), 2);

        QTest::mouseClick(list.newButton(), Qt::LeftButton);
        QCOMPARE(created.count(), 1);

        QTest::mouseClick(list.deleteButton(), Qt::LeftButton);
        QCOMPARE(deleted.count(), 1);
        QCOMPARE(deleted.at(0).at(0).toLongLong(), qint64(3));
        view->setFocus();
        QTest::keyClick(view, Qt::Key_Delete);
        QCOMPARE(deleted.count(), 2);

        // Rename in place: F2 / the button opens an editor; Enter commits.
        QTest::mouseClick(list.renameButton(), Qt::LeftButton);
        QLineEdit* editor = qobject_cast<QLineEdit*>(QApplication::focusWidget());
        QVERIFY(editor);
        editor->selectAll();
        QTest::keyClicks(editor, QStringLiteral("Gemma KV cache"));
        QTest::keyClick(editor, Qt::Key_Return);
        QTRY_COMPARE(renamed.count(), 1);  // the delegate commits from a queued call
        QCOMPARE(renamed.at(0).at(0).toLongLong(), qint64(3));
        QCOMPARE(renamed.at(0).at(1).toString(), QStringLiteral("Gemma KV cache"));

        // Refreshing the list keeps the current conversation, silently.
        list.setConversations(sample());
        QCOMPARE(view->currentIndex().row(), 2);
        QCOMPARE(selected.count(), 1);
        QCOMPARE(renamed.count(), 1);

        list.resize(280, 360);
        list.setCurrent(3);
        QVERIFY(list.grab().save(kShotDir + QStringLiteral("/conversation_list.png")));
    }

    void tokenInspectorShowsToken() {
        TokenInspector inspector;
        TokenData t;
        t.id = 1234;
        t.text = QStringLiteral(" Paris");
        t.probability = 0.614f;
        t.logprob = -0.412f;
        t.step_ms = 14.2;
        const char* pieces[] = {" Paris", " the", " France", " a",  " Lyon",
                                "\n",     " it",  " not",    " in", " located"};
        float left = 1.0f;
        for (int i = 0; i < 10; ++i) {
            const float p = i == 0 ? 0.55f : left * 0.45f;
            left -= p;
            t.before.push_back(
                {i == 0 ? 1234 : 2000 + i, QString::fromUtf8(pieces[i]), p, 9.0f - float(i)});
        }
        t.after = t.before.mid(0, 5);
        float sum = 0;
        for (auto& c : t.after) sum += c.probability;
        for (auto& c : t.after) c.probability /= sum;
        t.after[0].probability = t.probability;
        inspector.setToken(t);
        QCOMPARE(inspector.beforeTable()->rowCount(), 10);
        QCOMPARE(inspector.afterTable()->rowCount(), 5);
        QCOMPARE(inspector.beforeTable()->item(0, 1)->text(),
                 visiblePiece(QStringLiteral(" Paris")));
        QVERIFY(inspector.beforeTable()->item(0, 1)->font().bold());  // the chosen token
        QVERIFY(!inspector.beforeTable()->item(1, 1)->font().bold());
        QVERIFY(inspector.summaryText().contains(QStringLiteral("1234")));
        QVERIFY(inspector.summaryText().contains(QStringLiteral("61.4%")));
        QVERIFY(inspector.summaryText().contains(QStringLiteral("-0.412")));
        inspector.resize(360, 640);
        inspector.show();
        QVERIFY(QTest::qWaitForWindowExposed(&inspector));
        QVERIFY(inspector.grab().save(kShotDir + QStringLiteral("/token_inspector.png")));
        inspector.clear();
        QCOMPARE(inspector.beforeTable()->rowCount(), 0);
    }
};

QTEST_MAIN(TestConversationList)
#include "test_conversation_list.moc"
