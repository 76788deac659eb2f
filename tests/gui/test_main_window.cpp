// The main window end to end with a tiny model and a scratch database: send, stream, stop,
// regenerate, edit, a bad model file, closing mid-answer, the event loop staying responsive,
// and the real app killed with SIGKILL mid-generation keeping what was committed.
#include <QDockWidget>
#include <QLineEdit>
#include <QListView>
#include <QMenuBar>
#include <QMessageBox>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTextBrowser>
#include <QtTest>

#include "attention_heatmap.h"
#include "chat_view.h"
#include "conversation_store.h"
#include "main_window.h"
#include "message_document.h"
#include "panel_data.h"
#include "reference/tiny_model.h"
#include "shortcuts_dialog.h"
#include "stall_meter.h"
#include "util/test_paths.h"

using namespace tokenscope;
using app::MainWindow;
using app::Role;

class TestMainWindow : public QObject {
    Q_OBJECT

    QString model_;
    int store_counter_ = 0;

    std::filesystem::path fresh_store() {
        return std::filesystem::path(test::scratch_dir()) /
               ("store" + std::to_string(++store_counter_) + ".sqlite");
    }

    std::unique_ptr<MainWindow> open_window(const std::filesystem::path& store) {
        app::MainWindowOptions o;
        o.model_path = model_;
        o.store = store;
        o.load.threads = 1;  // leaves the second core to the GUI thread, as the app does by default
        o.load.kv_capacity_tokens = 1024;
        auto w = std::make_unique<MainWindow>(o);
        w->show();
        for (int i = 0; i < 600 && !w->modelReady(); ++i) QTest::qWait(50);
        return w;
    }

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);  // QSettings and data dirs of their own
        model_ =
            QString::fromStdString(test::tiny_model_path("window_llama", test::TinyModelSpec{}));
    }

    void sendStreamsAndCommits() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        QVERIFY(w->modelReady());
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        test::StallMeter meter;
        QElapsedTimer clock;
        clock.start();
        connect(w.get(), &MainWindow::generationDone, this, [&] {
            if (qEnvironmentVariableIsSet("TOKENSCOPE_STALL_LOG"))
                qInfo("done at %lld ms", clock.elapsed());
        });
        w->sendMessage("Tell me a story");
        if (qEnvironmentVariableIsSet("TOKENSCOPE_STALL_LOG"))
            qInfo("sent at %lld ms", clock.elapsed());
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
        qInfo(
            "longest event-loop stall while generating: %lld ms of the app's own work or blocking "
            "(%lld ms with "
            "preemption by other threads and processes)",
            static_cast<long long>(meter.worstOwn()), static_cast<long long>(meter.worst()));
#if defined(__SANITIZE_ADDRESS__)
        // ASan makes every allocation several times slower; the 50 ms bound is for real builds.
        qInfo("AddressSanitizer build: the stall bound is not asserted");
#else
        QVERIFY2(meter.worstOwn() < 50, qPrintable(QString::number(meter.worstOwn())));
#endif
        QCOMPARE(w->chatView()->messageCount(), 2);
        app::ConversationStore store(store_path);
        const auto messages = store.messages(w->currentConversation());
        QCOMPARE(messages.size(), 2);
        QCOMPARE(messages[0].role, Role::User);
        QCOMPARE(messages[0].content, QString("Tell me a story"));
        QCOMPARE(messages[1].role, Role::Assistant);
        QVERIFY(messages[1].complete);
        // The conversation records what answered it, and the list shows it on hover.
        QCOMPARE(store.conversation(w->currentConversation())->model_path, model_);
        auto* list = w->findChild<QListView*>("conversationView");
        QVERIFY(list);
        const QString tip = list->model()->index(0, 0).data(Qt::ToolTipRole).toString();
        QVERIFY2(tip.contains(model_), qPrintable(tip));
    }

    void stopKeepsThePartialAnswer() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        QVERIFY(w->modelReady());
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        w->sendMessage("Go on and on");
        QTRY_VERIFY_WITH_TIMEOUT(w->generating(), 5000);
        // Stopped at once, before the worker has picked the reply up: the Stop must hold. (It
        // used to be forgotten — the worker cleared the flag when it began the reply — and the
        // reply ran to its end; with a 50 ms wait here the test passed only while the reply
        // was still running 50 ms later.)
        w->stopGeneration();
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 10000);
        app::ConversationStore store(store_path);
        const auto messages = store.messages(w->currentConversation());
        QCOMPARE(messages.size(), 2);
        QCOMPARE(messages[1].role, Role::Assistant);
        QVERIFY(!messages[1].complete);
    }

    void regenerateAndEdit() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        QVERIFY(w->modelReady());
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        w->sendMessage("First question");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
        w->regenerate();
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 2, 60000);
        app::ConversationStore store(store_path);
        QCOMPARE(store.messages(w->currentConversation()).size(), 2);  // replaced, not added
        emit w->chatView()->editRequested(0, "Edited question");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 3, 60000);
        const auto messages = store.messages(w->currentConversation());
        QCOMPARE(messages.size(), 2);
        QCOMPARE(messages[0].content, QString("Edited question"));
        QCOMPARE(w->chatView()->messageCount(), 2);
    }

    // View › Attention on hover on a real reply: the worker's token bytes find the question in
    // the templated prompt, and hovering a word of the question or of the reply frames exactly
    // the token the Attention panel labels at that position.
    void attentionOverlayOnARealReply() {
        auto w = open_window(fresh_store());
        QVERIFY(w->modelReady());
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        w->sendMessage("Tell me a story");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
        QAction* toggle = nullptr;
        for (QAction* menu : w->menuBar()->actions())
            for (QAction* a : menu->menu() ? menu->menu()->actions() : QList<QAction*>())
                if (a->text() == "Attention on hover") toggle = a;
        QVERIFY(toggle);
        toggle->trigger();
        ui::ChatView* chat = w->chatView();
        QVERIFY(chat->attentionOverlay());
        // The panel's data for the finished reply (the chat got the same).
        QTRY_VERIFY_WITH_TIMEOUT(!w->attentionView()->data().rows.isEmpty(), 10000);
        const ui::AttentionData data = w->attentionView()->data();
        const ui::MessageDocument* doc = chat->messageDocument();
        const auto hovered_text = [&] {
            for (const auto& s : chat->transcript()->extraSelections())
                if (s.format.fontUnderline()) return s.cursor.selectedText();
            return QString();
        };
        // "me" of the question.
        chat->showAttentionAt(doc->messageBodyRange(0).first + 5);
        const int q = chat->attentionPosition();
        QVERIFY(q > 0 && q < data.labels.size());
        QCOMPARE(hovered_text().trimmed(), data.labels[q].trimmed());
        QVERIFY(hovered_text().contains("me"));
        // The reply's first visible token comes after the whole prompt. (The random model's
        // first token can have no text of its own: a control token, or the first bytes of a
        // character that a later token completes.)
        const auto& tokens = chat->message(1).tokens;
        int shown = 0;
        while (shown < tokens.size() &&
               doc->tokenRange({1, shown}).second <= doc->tokenRange({1, shown}).first)
            ++shown;
        QVERIFY2(shown < tokens.size(), "no reply token has text");
        const auto first = doc->tokenRange({1, shown});
        chat->showAttentionAt(first.first);
        const int r = chat->attentionPosition();
        QVERIFY2(r > q, qPrintable(QString("%1 <= %2").arg(r).arg(q)));
        QCOMPARE(hovered_text(), tokens[shown].text);
        QVERIFY2(chat->attentionLegendText().contains("on text not shown"),
                 qPrintable(chat->attentionLegendText()));
    }

    // Alternative replies: two regenerations keep three versions, "‹ 3/3 ›" under the reply;
    // the arrows switch between them (text and token trace), and a restart shows the chosen one.
    void alternativeRepliesSwitch() {
        const auto store_path = fresh_store();
        QStringList texts;
        {
            auto w = open_window(store_path);
            QVERIFY(w->modelReady());
            QSignalSpy done(w.get(), &MainWindow::generationDone);
            w->sendMessage("Pick a word");
            QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
            ui::ChatView* chat = w->chatView();
            texts << chat->message(1).text;
            for (int i = 2; i <= 3; ++i) {
                w->regenerate();
                QTRY_VERIFY_WITH_TIMEOUT(done.count() == i, 60000);
                texts << chat->message(1).text;
            }
            QCOMPARE(chat->messageCount(), 2);
            QCOMPARE(chat->message(1).version, 3);
            QCOMPARE(chat->message(1).versions, 3);
            const ui::MessageDocument* doc = chat->messageDocument();
            const QString plain = doc->document()->toPlainText();
            QVERIFY2(plain.contains(QString::fromUtf8(" \u2039 3/3 \u203A ")), qPrintable(plain));
            QVERIFY(doc->versionLinkRange(1, -1).first >= 0);  // back is a link
            QCOMPARE(doc->versionLinkRange(1, +1).first, -1);  // nothing newer
            emit chat->versionRequested(1, -1);
            QCOMPARE(chat->message(1).text, texts[1]);
            QCOMPARE(chat->message(1).version, 2);
            emit chat->versionRequested(1, -1);
            QCOMPARE(chat->message(1).text, texts[0]);
            // The first version's tokens came back with it (inspectable, spelling its text).
            QString joined;
            for (const auto& t : chat->message(1).tokens) joined += t.text;
            QVERIFY(!chat->message(1).tokens.isEmpty());
            QCOMPARE(joined, texts[0]);
            emit chat->versionRequested(1, -1);  // already the first: nothing happens
            QCOMPARE(chat->message(1).version, 1);
            emit chat->versionRequested(1, +1);
            QCOMPARE(chat->message(1).text, texts[1]);
        }
        auto again = open_window(store_path);
        QCOMPARE(again->chatView()->message(1).text, texts[1]);
        QCOMPARE(again->chatView()->message(1).version, 2);
        QCOMPARE(again->chatView()->message(1).versions, 3);
    }

    void badModelShowsTheEngineMessage() {
        auto w = open_window(fresh_store());
        QVERIFY(w->modelReady());
        const QString bad = QString::fromStdString(test::scratch_dir()) + "/not-a-model.gguf";
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray("this is not a gguf file, not at all"));
        f.close();
        w->openModel(bad);
        QMessageBox* box = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((box = w->findChild<QMessageBox*>("errorDialog")) != nullptr,
                                 10000);
        QVERIFY2(box->text().contains(bad + ": offset 0: bad magic"), qPrintable(box->text()));
        box->accept();
        QVERIFY(w->modelReady());  // the previous model stays usable
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        w->sendMessage("Still there?");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
    }

    // Closing while a reply streams: the window goes at once and the partial reply is kept,
    // marked incomplete. The tiny model samples with a fresh seed, and about one reply in ten
    // meets its end of sequence within a few dozen tokens, which a fast machine writes inside
    // the 50 ms wait below (CI failed on that). So a try counts only if the reply is still
    // running on the GUI thread's side when close() is called: close() runs on this thread,
    // nothing can finish the reply between the check and it, and closeEvent saves what
    // streamed. A reply that finished first is a new try in a fresh window.
    void closingMidAnswerIsPromptAndSaves() {
        int tries = 0;
        for (; tries < 20; ++tries) {
            const auto store_path = fresh_store();
            auto w = open_window(store_path);
            QVERIFY(w->modelReady());
            w->sendMessage("Talk for a long time");
            QTRY_VERIFY_WITH_TIMEOUT(w->generating(), 5000);
            QTest::qWait(50);
            if (!w->generating()) continue;  // the reply ended within the wait: try again
            const qint64 conversation = w->currentConversation();
            QElapsedTimer t;
            t.start();
            w->close();
            w.reset();  // joins the worker thread
            qInfo("close + teardown mid-generation (try %d): %lld ms", tries + 1,
                  static_cast<long long>(t.elapsed()));
            QVERIFY(t.elapsed() < 3000);
            app::ConversationStore store(store_path);
            const auto messages = store.messages(conversation);
            QCOMPARE(messages.size(), 2);
            QVERIFY(!messages[1].complete);
            QCOMPARE(messages[1].finish_reason, QString("cancelled"));
            break;
        }
        QVERIFY2(tries < 20,
                 "every reply ended within 50 ms: the window was never closed mid-answer");
    }

    void docksAreRestorable() {
        auto w = open_window(fresh_store());
        QVERIFY(w->modelReady());
        const auto docks = w->findChildren<QDockWidget*>();
        QVERIFY(docks.size() >= 7);
        for (auto* d : docks) QVERIFY2(!d->objectName().isEmpty(), "saveState needs object names");
    }

    // Help › Keyboard shortcuts lists each menu shortcut once, as the menus define them (the
    // expected list below is the app's documented keys, written out by hand; standard keys as
    // this platform binds them), and the chat's keys.
    void keyboardShortcutsListEveryMenuShortcut() {
        auto w = open_window(fresh_store());
        QAction* open_list = nullptr;
        for (QAction* a : w->findChildren<QAction*>()) {
            if (a->text() == QStringLiteral("&Keyboard shortcuts")) open_list = a;
        }
        QVERIFY(open_list);
        open_list->trigger();
        auto* dialog = w->findChild<ui::ShortcutsDialog*>();
        QVERIFY(dialog);
        QVERIFY(dialog->isVisible());
        auto native = [](const QKeySequence& k) { return k.toString(QKeySequence::NativeText); };
        const QVector<QPair<QString, QString>> expected = {
            {QStringLiteral("File \u203A Open model"), native(QKeySequence::Open)},
            {QStringLiteral("File \u203A New conversation"), native(QKeySequence::New)},
            {QStringLiteral("File \u203A Quit"), native(QKeySequence::Quit)},
            {QStringLiteral("Edit \u203A Find conversation"), native(QKeySequence::Find)},
            {QStringLiteral("Help \u203A Keyboard shortcuts"), native(QKeySequence::HelpContents)},
            {QStringLiteral("Tools \u203A Step: one token and pause"),
             native(QKeySequence(Qt::Key_F10))},
            {QStringLiteral("Tools \u203A Every head of the layer"),
             native(QKeySequence(QStringLiteral("Ctrl+Shift+H")))},
            {QStringLiteral("Chat \u203A Send the message"), native(QKeySequence(Qt::Key_Return))},
            {QStringLiteral("Chat \u203A Stop generating, or cancel an edit"),
             native(QKeySequence(Qt::Key_Escape))},
        };
        QTableWidget* table = dialog->table();
        for (const auto& [where, keys] : expected) {
            int found = 0;
            for (int r = 0; r < table->rowCount(); ++r) {
                if (table->item(r, 0)->text() == where) {
                    ++found;
                    QCOMPARE(table->item(r, 1)->text(), keys);
                }
            }
            // A standard key this platform binds to nothing (Quit under offscreen) gives the
            // action no shortcut, so it is not listed.
            const int want = keys.isEmpty() ? 0 : 1;
            QVERIFY2(found == want,
                     qPrintable(where + QStringLiteral(": listed %1 times").arg(found)));
        }
        // Every row has keys; no menu action with a shortcut is missing (counted from the actions).
        int with_keys = 0;
        for (QAction* a : w->menuBar()->findChildren<QAction*>()) {
            if (!a->shortcuts().isEmpty() && !a->menu()) ++with_keys;
        }
        QCOMPARE(table->rowCount(), with_keys + int(ui::chatShortcuts().size()));
        dialog->filterBox()->setText(QStringLiteral("step"));
        QCOMPARE(dialog->visibleRows(), 1);
        dialog->filterBox()->clear();
        QCOMPARE(dialog->visibleRows(), table->rowCount());
    }

    // The real app, killed with SIGKILL while it generates: what it committed (the user's
    // message) is there afterwards and the database is intact.
    void sigkillMidGeneration() {
        const auto store_path = fresh_store();
        QProcess app;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("QT_QPA_PLATFORM", "offscreen");
        app.setProcessEnvironment(env);
        app.start(
            TOKENSCOPE_APP,
            {"--model", model_, "--store", QString::fromStdString(store_path.string()), "--threads",
             "1", "--screenshot", QString::fromStdString(test::scratch_dir()) + "/never.png",
             "--prompt", "Please keep talking"});
        QVERIFY(app.waitForStarted(10000));
        // Poll the database until the user's message is committed, then kill at once.
        bool committed = false;
        for (int i = 0; i < 600 && !committed; ++i) {
            QTest::qWait(25);
            if (!std::filesystem::exists(store_path)) continue;
            try {
                app::ConversationStore peek(store_path);
                for (const auto& c : peek.conversations()) {
                    if (!peek.messages(c.id).isEmpty()) committed = true;
                }
            } catch (const std::exception&) {
            }
        }
        QVERIFY(committed);
        app.kill();  // SIGKILL
        QVERIFY(app.waitForFinished(5000));
        app::ConversationStore store(store_path);
        const auto conversations = store.conversations();
        QCOMPARE(conversations.size(), 1);
        const auto messages = store.messages(conversations[0].id);
        QVERIFY(!messages.isEmpty());
        QCOMPARE(messages[0].content, QString("Please keep talking"));
        QCOMPARE(store.journal_mode(), QString("wal"));
    }
};

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
