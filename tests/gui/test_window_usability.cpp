// The main window as a newcomer uses it (issue 11): renaming, --help without a display, the
// window on laptop screens, token inspection of any reply (also after a restart), switching
// conversation while one generates, deleting with confirmation and undo, Ctrl+N from the search
// box, panels that follow the conversation shown, a footer under each reply, content search,
// the status line after a failed model load, and the edit banner. A tiny random model and a
// scratch database; each test starts from empty QSettings.
#include <QAbstractButton>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QMenuBar>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QScrollBar>
#include <QSemaphore>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabBar>
#include <QTextBrowser>
#include <QToolButton>
#include <QtTest>

#include "attention_heatmap.h"
#include "chat_view.h"
#include "conversation_list.h"
#include "conversation_store.h"
#include "distribution_chart.h"
#include "main_window.h"
#include "metrics_view.h"
#include "reference/tiny_model.h"
#include "sampling_panel.h"
#include "stall_meter.h"
#include "token_inspector.h"
#include "util/test_paths.h"

using namespace tokenscope;
using app::MainWindow;
using app::Role;

namespace {

// The widget's rectangle in window coordinates.
QRect in_window(const QWidget* widget, const QWidget* window) {
    return QRect(widget->mapTo(window, QPoint(0, 0)), widget->size());
}

// True when the widget is shown, has a usable size and lies wholly inside the window, with
// none of it clipped away by a parent (a widget scrolled or squeezed out of its container).
bool reachable(const QWidget* widget, const QWidget* window, QString* why) {
    if (!widget->isVisible()) {
        *why = widget->objectName() + " is hidden";
        return false;
    }
    const QRect r = in_window(widget, window);
    if (r.width() < 16 || r.height() < 16) {
        *why = QStringLiteral("%1 is only %2x%3")
                   .arg(widget->objectName())
                   .arg(r.width())
                   .arg(r.height());
        return false;
    }
    if (!window->rect().contains(r)) {
        *why = QStringLiteral("%1 at (%2,%3 %4x%5) is outside the %6x%7 window")
                   .arg(widget->objectName())
                   .arg(r.x())
                   .arg(r.y())
                   .arg(r.width())
                   .arg(r.height())
                   .arg(window->width())
                   .arg(window->height());
        return false;
    }
    for (const QWidget* p = widget->parentWidget(); p && p != window; p = p->parentWidget()) {
        const QRect pr = in_window(p, window);
        if (!pr.contains(r)) {
            *why = QStringLiteral("%1 is clipped by %2")
                       .arg(widget->objectName(), QString(p->metaObject()->className()));
            return false;
        }
    }
    return true;
}

QPushButton* dialog_button(QMessageBox* box, const QString& text) {
    for (QAbstractButton* b : box->buttons())
        if (b->text().remove('&') == text) return qobject_cast<QPushButton*>(b);
    return nullptr;
}

}  // namespace

class TestWindowUsability : public QObject {
    Q_OBJECT

    QString model_;
    QString long_model_;  // a 4096-token context, for 2000 streamed tokens
    int store_counter_ = 0;

    std::filesystem::path fresh_store() {
        return std::filesystem::path(test::scratch_dir()) /
               ("usability" + std::to_string(++store_counter_) + ".sqlite");
    }

    // keep_settings: a "restart" that keeps what the previous window saved.
    std::unique_ptr<MainWindow> open_window(const std::filesystem::path& store,
                                            bool keep_settings = false,
                                            QSize size = QSize(1500, 950),
                                            const QString& model = {}) {
        if (!keep_settings) QSettings().clear();
        app::MainWindowOptions o;
        o.model_path = model.isEmpty() ? model_ : model;
        o.store = store;
        o.load.threads = 1;
        o.load.kv_capacity_tokens = model.isEmpty() ? 1024 : 4096;
        auto w = std::make_unique<MainWindow>(o);
        w->resize(size);
        w->show();
        if (!QTest::qWaitForWindowExposed(w.get())) qWarning("window not exposed");
        for (int i = 0; i < 600 && !w->modelReady(); ++i) QTest::qWait(50);
        return w;
    }

    // Starts a reply that is still streaming after a few tokens, in a new conversation. The
    // tiny model samples with a random seed and may end a reply early (its end-of-turn token
    // is in the vocabulary like any other): then it tries again, in another new conversation.
    // Returns the generating conversation; `finished` counts the replies that ended early.
    static qint64 start_streaming_reply(MainWindow* w, QSignalSpy& done, int* finished) {
        for (int attempt = 0; attempt < 8; ++attempt) {
            const int before = int(done.count());
            w->newConversation();
            w->sendMessage("Write a long answer");
            QElapsedTimer clock;
            clock.start();
            while (clock.elapsed() < 30000 && done.count() == before &&
                   w->chatView()->message(1).tokens.size() < 3)
                QTest::qWait(5);
            if (done.count() == before && w->generating()) return w->currentConversation();
            while (clock.elapsed() < 60000 && done.count() == before) QTest::qWait(5);
            if (done.count() == before) return -1;  // neither streaming nor finished: fail
            ++*finished;
        }
        return -1;
    }

    static void set_max_tokens(MainWindow* w, int n) {
        w->samplingPanel()->spinBox(QStringLiteral("max_tokens"))->setValue(n);
    }

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        model_ =
            QString::fromStdString(test::tiny_model_path("usability_llama", test::TinyModelSpec{}));
        test::TinyModelSpec long_context;
        long_context.context = 4096;
        long_model_ =
            QString::fromStdString(test::tiny_model_path("usability_llama_4k", long_context));
    }

    // Defect 1: Rename, type, Enter crashed in QSortFilterProxyModel::setData because the
    // owner rebuilt the list model inside the delegate's commit.
    void renameThroughTheEditorSavesAndSurvives() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        w->newConversation();
        const qint64 id = w->currentConversation();
        ui::ConversationList* list = w->conversationList();
        QTest::mouseClick(list->renameButton(), Qt::LeftButton);
        auto* editor = qobject_cast<QLineEdit*>(QApplication::focusWidget());
        QVERIFY(editor);
        editor->selectAll();
        QTest::keyClicks(editor, QStringLiteral("Renamed by hand"));
        QTest::keyClick(editor, Qt::Key_Return);
        app::ConversationStore store(store_path);
        QTRY_COMPARE(store.conversation(id)->title, QStringLiteral("Renamed by hand"));
        QTest::qWait(50);  // the refresh after the rename has run
        QCOMPARE(list->listView()->currentIndex().data().toString(),
                 QStringLiteral("Renamed by hand"));
        // Still usable: a second rename with F2.
        list->listView()->setFocus();
        QTest::keyClick(list->listView(), Qt::Key_F2);
        editor = qobject_cast<QLineEdit*>(QApplication::focusWidget());
        QVERIFY(editor);
        editor->selectAll();
        QTest::keyClicks(editor, QStringLiteral("Second name"));
        QTest::keyClick(editor, Qt::Key_Return);
        QTRY_COMPARE(store.conversation(id)->title, QStringLiteral("Second name"));
    }

    // Defect 2: --help and --version must not need a display.
    void helpAndVersionWithoutADisplay() {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(name);
        auto run = [&](const QStringList& args, int* code) {
            QProcess app;
            app.setProcessEnvironment(env);
            app.start(TOKENSCOPE_APP, args);
            if (!app.waitForFinished(20000)) return QString("timeout");
            *code = app.exitStatus() == QProcess::NormalExit ? app.exitCode() : -1;
            return QString::fromUtf8(app.readAllStandardOutput() + app.readAllStandardError());
        };
        int code = -99;
        QString out = run({"--help"}, &code);
        QCOMPARE(code, 0);
        QVERIFY2(out.contains("--model") && out.contains("--kv-type"), qPrintable(out));
        out = run({"--version"}, &code);
        QCOMPARE(code, 0);
        QVERIFY2(out.contains("tokenscope " TOKENSCOPE_VERSION_STRING), qPrintable(out));
        out = run({"--no-such-option"}, &code);
        QCOMPARE(code, 2);
        QVERIFY2(out.contains("no-such-option"), qPrintable(out));
    }

    // Defect 3: the message box, Send and the conversation buttons are reachable at common
    // laptop sizes, the window is not forced larger than the screen, and Reset layout brings
    // back every panel.
    void fitsLaptopScreens_data() {
        QTest::addColumn<QSize>("size");
        QTest::newRow("1280x720") << QSize(1280, 720);
        QTest::newRow("1366x768") << QSize(1366, 768);
        QTest::newRow("1920x1080") << QSize(1920, 1080);
    }
    void fitsLaptopScreens() {
        QFETCH(QSize, size);
        auto w = open_window(fresh_store(), false, size);
        QTest::qWait(100);
        QVERIFY2(w->minimumSizeHint().width() <= 1280 && w->minimumSizeHint().height() <= 720,
                 qPrintable(QStringLiteral("minimum %1x%2")
                                .arg(w->minimumSizeHint().width())
                                .arg(w->minimumSizeHint().height())));
        QCOMPARE(w->size(), size);
        ui::ChatView* chat = w->chatView();
        ui::ConversationList* list = w->conversationList();
        chat->input()->setObjectName("message box");
        chat->sendButton()->setObjectName("Send");
        chat->stopButton()->setObjectName("Stop");
        list->newButton()->setObjectName("New");
        list->renameButton()->setObjectName("Rename");
        list->deleteButton()->setObjectName("Delete");
        w->statusBar()->setObjectName("status bar");
        for (QWidget* widget : std::initializer_list<QWidget*>{
                 chat->input(), chat->sendButton(), chat->stopButton(), list->newButton(),
                 list->renameButton(), list->deleteButton(), w->statusBar()}) {
            QString why;
            QVERIFY2(reachable(widget, w.get(), &why), qPrintable(why));
        }
        // The chat keeps at least 40 % of the width.
        QVERIFY2(chat->width() >= size.width() * 40 / 100,
                 qPrintable(QString::number(chat->width())));
        // Every panel is docked and visible or one tab away.
        for (QDockWidget* d : w->findChildren<QDockWidget*>()) {
            QVERIFY2(!d->isFloating(), qPrintable(d->objectName()));
            QVERIFY2(w->dockWidgetArea(d) != Qt::NoDockWidgetArea, qPrintable(d->objectName()));
        }
        // Every dock tab's whole title is on screen: no group needs its scroll arrows (at
        // 1280x720 a group of six had cut "Step" and "Heads" to "St…" and "Hea…").
        for (QTabBar* bar : w->findChildren<QTabBar*>()) {
            if (!bar->isVisible() || bar->parentWidget() != w.get()) continue;
            for (int i = 0; i < bar->count(); ++i) {
                QVERIFY2(bar->rect().contains(bar->tabRect(i)),
                         qPrintable(QStringLiteral("tab '%1' at %2+%3 in a bar %4 wide")
                                        .arg(bar->tabText(i))
                                        .arg(bar->tabRect(i).x())
                                        .arg(bar->tabRect(i).width())
                                        .arg(bar->width())));
                QCOMPARE(bar->elideMode(), Qt::ElideNone);
            }
        }
        QVERIFY(w->grab().save(
            QString::fromStdString(test::scratch_dir()) +
            QStringLiteral("/window-%1x%2.png").arg(size.width()).arg(size.height())));

        // Reset layout: a closed and a floating panel come back docked.
        auto docks = w->findChildren<QDockWidget*>();
        docks[0]->close();
        docks[3]->setFloating(true);
        w->resetLayout();
        QTest::qWait(50);
        for (QDockWidget* d : docks) {
            // Shown (its tab may be behind another panel's) and docked.
            QVERIFY2(d->toggleViewAction()->isChecked() && !d->isFloating(),
                     qPrintable(d->objectName()));
        }
        QCOMPARE(w->size(), size);
    }

    // Defect 14 (width): at 1200 px the chat is not squeezed while the panels keep theirs.
    void chatKeepsItsShareWhenNarrowed() {
        auto w = open_window(fresh_store(), false, QSize(1500, 900));
        QTest::qWait(50);
        w->resize(1200, 800);
        QTest::qWait(100);
        QVERIFY2(w->chatView()->width() >= 1200 * 40 / 100,
                 qPrintable(QString::number(w->chatView()->width())));
    }

    // Defect 4: every reply keeps its token trace, also after a restart; colouring by
    // probability is remembered.
    void everyReplyIsInspectableAfterARestart() {
        const auto store_path = fresh_store();
        qint64 conversation = -1;
        {
            auto w = open_window(store_path);
            set_max_tokens(w.get(), 12);
            QSignalSpy done(w.get(), &MainWindow::generationDone);
            w->sendMessage("First question");
            QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
            w->sendMessage("Second question");
            QTRY_VERIFY_WITH_TIMEOUT(done.count() == 2, 60000);
            conversation = w->currentConversation();
            w->chatView()->setColorByProbability(true);
            // Away and back: the first reply is re-read from the database.
            w->newConversation();
            w->selectConversation(conversation);
            QCOMPARE(w->chatView()->messageCount(), 4);
            QVERIFY(!w->chatView()->message(1).tokens.isEmpty());
            QVERIFY(!w->chatView()->message(3).tokens.isEmpty());
            w->close();
        }
        app::ConversationStore store(store_path);
        const auto messages = store.messages(conversation);
        QCOMPARE(messages.size(), 4);
        for (int i : {1, 3}) {
            const auto trace = store.token_trace(messages[i].id);
            QVERIFY(!trace.isEmpty());
            QString joined;
            for (const auto& t : trace) joined += t.text;
            QCOMPARE(joined, messages[i].content);
            QVERIFY(!trace[0].before.isEmpty());
            QVERIFY(!trace[0].after.isEmpty());
        }
        // The restart.
        auto w = open_window(store_path, true);
        w->selectConversation(conversation);
        QVERIFY(w->chatView()->colorByProbability());
        const ui::ChatMessage& first_reply = w->chatView()->message(1);
        QCOMPARE(first_reply.tokens.size(), store.token_trace(messages[1].id).size());
        QVERIFY(!first_reply.tokens[0].after.isEmpty());
        // Clicking a token of the old reply shows it in the token panel and its step in the
        // sampling chart.
        ui::ChatView* chat = w->chatView();
        // The sampled reply is random: click its first token with a visible character.
        int pick = -1;
        for (int t = 0; t < first_reply.tokens.size() && pick < 0; ++t) {
            const QString text = first_reply.tokens[t].text;
            if (!text.trimmed().isEmpty() && !text.contains('\n')) pick = t;
        }
        QVERIFY2(pick >= 0, "the first reply has no visible token");
        const ui::TokenRef ref{1, pick};
        chat->transcript()->ensureCursorVisible();
        const QRect r = chat->tokenRect(ref);
        QVERIFY(!r.isEmpty());
        QVERIFY2(chat->tokenAt(r.center()) == ref,
                 qPrintable(QString("token %1 '%2' at (%3, %4) %5x%6 hit token %7")
                                .arg(pick)
                                .arg(first_reply.tokens[pick].text)
                                .arg(r.x())
                                .arg(r.y())
                                .arg(r.width())
                                .arg(r.height())
                                .arg(chat->tokenAt(r.center()).token)));
        QTest::mouseClick(chat->transcript()->viewport(), Qt::LeftButton, {}, r.center());
        QTRY_VERIFY(w->tokenInspector()->hasToken());
        QCOMPARE(w->tokenInspector()->token().id, first_reply.tokens[pick].id);
        QVERIFY2(
            w->samplingPanel()->stepTitle().contains(QString::number(first_reply.tokens[pick].id)),
            qPrintable(w->samplingPanel()->stepTitle()));
        QVERIFY(!w->samplingPanel()->chart()->candidates().isEmpty());
    }

    // Defect 5: switching conversation while one generates shows the chosen one; the answer
    // keeps streaming into its own conversation and is saved there.
    void switchingDuringGenerationShowsTheChosenConversation() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        set_max_tokens(w.get(), 400);
        w->newConversation();
        const qint64 other = w->currentConversation();
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        int ended_early = 0;
        const qint64 generating = start_streaming_reply(w.get(), done, &ended_early);
        QVERIFY2(generating >= 0, "no reply kept streaming in 8 attempts");
        // The user clicks the other conversation in the list.
        ui::ConversationList* list = w->conversationList();
        const int row = int(list->visibleIds().indexOf(other));
        QVERIFY(row >= 0);
        QListView* view = list->listView();
        QTest::mouseClick(view->viewport(), Qt::LeftButton, {},
                          view->visualRect(view->model()->index(row, 0)).center());
        QCOMPARE(w->currentConversation(), other);
        QCOMPARE(list->current(), other);
        QCOMPARE(w->chatView()->messageCount(), 0);
        QCOMPARE(w->generatingConversation(), generating);
        QTest::qWait(100);
        QCOMPARE(w->chatView()->messageCount(), 0);  // nothing streams into the wrong one
        QVERIFY(!w->chatView()->sendButton()->isEnabled());
        // Back to the generating one: what streamed so far is there.
        w->selectConversation(generating);
        QCOMPARE(w->chatView()->messageCount(), 2);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == ended_early + 1, 60000);
        app::ConversationStore store(store_path);
        const auto messages = store.messages(generating);
        QCOMPARE(messages.size(), 2);
        QCOMPARE(messages[1].role, Role::Assistant);
        QCOMPARE(w->chatView()->message(1).text, messages[1].content);
        QVERIFY(store.messages(other).isEmpty());
        // Rename and Delete act on the selected conversation.
        QCOMPARE(list->current(), generating);
    }

    // Defect 6: Delete asks first, and can be undone.
    void deleteAsksAndCanBeUndone() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        set_max_tokens(w.get(), 6);
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        w->sendMessage("Keep me");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
        const qint64 id = w->currentConversation();
        app::ConversationStore store(store_path);
        const auto before = store.messages(id);
        QTRY_VERIFY(!store.token_trace(before[1].id).isEmpty());  // written off the GUI thread
        const auto trace_before = store.token_trace(before[1].id);

        QTest::mouseClick(w->conversationList()->deleteButton(), Qt::LeftButton);
        QMessageBox* box = nullptr;
        QTRY_VERIFY((box = w->findChild<QMessageBox*>("confirmDelete")) != nullptr);
        QVERIFY(store.conversation(id).has_value());  // nothing deleted before the answer
        QVERIFY(box->text().contains("Keep me"));
        box->button(QMessageBox::Cancel)->click();
        QTRY_VERIFY(w->findChild<QMessageBox*>("confirmDelete") == nullptr);
        QVERIFY(store.conversation(id).has_value());

        QTest::mouseClick(w->conversationList()->deleteButton(), Qt::LeftButton);
        QTRY_VERIFY((box = w->findChild<QMessageBox*>("confirmDelete")) != nullptr);
        QPushButton* remove = dialog_button(box, "Delete");
        QVERIFY(remove);
        remove->click();
        QTRY_VERIFY(!store.conversation(id).has_value());
        QVERIFY(w->conversationList()->visibleIds().isEmpty());
        auto* undo = w->findChild<QToolButton*>("undoDelete");
        QVERIFY(undo && undo->isVisible());
        QTest::mouseClick(undo, Qt::LeftButton);
        const auto restored = store.conversations();
        QCOMPARE(restored.size(), 1);
        QCOMPARE(restored[0].title, QStringLiteral("Keep me"));
        const auto after = store.messages(restored[0].id);
        QCOMPARE(after.size(), before.size());
        for (int i = 0; i < after.size(); ++i) {
            QCOMPARE(after[i].content, before[i].content);
            QCOMPARE(after[i].finish_reason, before[i].finish_reason);
        }
        QTRY_COMPARE(store.token_trace(after[1].id), trace_before);
        QCOMPARE(w->currentConversation(), restored[0].id);
        QVERIFY(!undo->isVisible());
    }

    // Defect 8: Ctrl+N while the search box has focus (the focus at start-up) makes a new
    // conversation instead of "Ambiguous shortcut overload".
    void ctrlNFromTheSearchBox() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        w->activateWindow();
        w->conversationList()->searchBox()->setFocus();
        QTRY_VERIFY(w->conversationList()->searchBox()->hasFocus());
        app::ConversationStore store(store_path);
        const qsizetype before = store.conversations().size();
        QTest::keyClick(w->conversationList()->searchBox(), Qt::Key_N, Qt::ControlModifier);
        QTRY_COMPARE(store.conversations().size(), before + 1);
    }

    // Defects 9, 10 and 12: panels follow the conversation shown; the sampling chart shows the
    // last visible token's step, never the hidden stop token's; a reply ended by Stop says so
    // and shows its speed.
    void panelsFollowTheConversation() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        set_max_tokens(w.get(), 10);
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        w->sendMessage("Hello there");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
        QTRY_VERIFY(w->tokenInspector()->hasToken());
        // The panels show a token the user can see.
        QVERIFY(!w->tokenInspector()->token().text.isEmpty());
        QVERIFY(!w->samplingPanel()->chart()->candidates().isEmpty());
        QVERIFY(w->metricsView()->data().prompt_tokens > 0);
        // The reply's footer says how it ended, as saved: max tokens (10 tokens), or the model's
        // own end of turn when the random model chose it earlier.
        const QString text = w->chatView()->messageDocument()->document()->toPlainText();
        app::ConversationStore store(store_path);
        const auto saved = store.messages(w->currentConversation());
        QCOMPARE(saved.size(), 2);
        QVERIFY2(text.contains(QStringLiteral("%1 token").arg(saved[1].token_count)),
                 qPrintable(text));
        if (saved[1].finish_reason == QLatin1String("max_tokens")) {
            QCOMPARE(saved[1].token_count, 10);
            QVERIFY2(text.contains("max tokens"), qPrintable(text));
        } else {
            QVERIFY2(!text.contains("max tokens") && !text.contains("Stopped"), qPrintable(text));
        }

        w->newConversation();
        QVERIFY(!w->tokenInspector()->hasToken());
        QVERIFY(w->samplingPanel()->chart()->candidates().isEmpty());
        QCOMPARE(w->metricsView()->data().prompt_tokens, qint64(0));
        QVERIFY(w->attentionView()->data().rows.isEmpty());
    }

    // Defect 10: a reply that ends with the hidden stop token leaves the token panel and the
    // sampling chart on the last visible token, not on the stop token's 100 % step. The worker
    // is held on its thread so that the test can replay the signal sequence it sends.
    void panelsSkipTheHiddenStopToken() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        set_max_tokens(w.get(), 5);
        QSemaphore release;
        QMetaObject::invokeMethod(
            w->worker(), [&release] { release.acquire(); }, Qt::QueuedConnection);
        w->sendMessage("Capital of France?");  // queued behind the held call
        QVERIFY(w->generating());
        const qint64 conversation = w->currentConversation();
        ui::TokenData paris;
        paris.id = 1234;
        paris.text = " Paris";
        paris.probability = 0.7f;
        paris.before = {{1234, " Paris", 0.6f, 9.0f}, {77, " Lyon", 0.3f, 8.2f}};
        paris.after = {{1234, " Paris", 0.7f, 9.0f}, {77, " Lyon", 0.3f, 8.2f}};
        ui::TokenData stop;
        stop.id = 2;
        stop.text = QString();  // end of turn: no text
        stop.probability = 1.0f;
        stop.before = {{2, "</s>", 1.0f, 20.0f}};
        stop.after = stop.before;
        emit w->worker()->tokenGenerated(conversation, paris);
        emit w->worker()->tokenGenerated(conversation, stop);
        emit w->worker()->generationFinished(conversation, " Paris", "eos", true);
        QVERIFY(!w->generating());
        QTRY_VERIFY(w->tokenInspector()->hasToken());
        QTest::qWait(100);  // the panel timer has fired
        QCOMPARE(w->tokenInspector()->token().id, 1234);
        QVERIFY2(w->samplingPanel()->stepTitle().contains("1234"),
                 qPrintable(w->samplingPanel()->stepTitle()));
        QCOMPARE(w->samplingPanel()->chart()->candidates().size(), 2);
        // The saved trace has both tokens (the stop token is part of what the model did).
        app::ConversationStore store(store_path);
        const auto messages = store.messages(conversation);
        QCOMPARE(messages.size(), 2);
        QTRY_COMPARE(store.token_trace(messages[1].id).size(), 2);
        QCOMPARE(messages[1].finish_reason, QStringLiteral("eos"));
        // Let the held worker run its (real) generation; the window ignores its late signals.
        QSignalSpy finished(w->worker(), &app::InferenceWorker::generationFinished);
        release.release();
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 60000);
        QTest::qWait(50);
        QCOMPARE(store.messages(conversation).size(), 2);
    }

    // Issue 12 (models people have): File > Models lists the models folder with architecture,
    // quantization, size and instruct/base, and switches to the one chosen.
    void modelsMenuListsTheFolderAndSwitches() {
        const QString dir = QString::fromStdString(test::scratch_dir()) + "/models-menu";
        QDir().mkpath(dir);
        QVERIFY(QFile::copy(model_, dir + "/tiny-chat-instruct.gguf"));
        QVERIFY(QFile::copy(long_model_, dir + "/tiny-base.gguf"));
        QFile broken(dir + "/broken.gguf");
        QVERIFY(broken.open(QIODevice::WriteOnly));
        broken.write("nope");
        broken.close();
        const QByteArray before = qgetenv("TOKENSCOPE_MODELS");
        qputenv("TOKENSCOPE_MODELS", dir.toUtf8());
        auto w = open_window(fresh_store());
        QSignalSpy scanned(w.get(), &MainWindow::modelsScanned);
        w->scanModels();
        QTRY_VERIFY_WITH_TIMEOUT(scanned.count() == 1, 20000);
        QList<QAction*> models;
        for (QAction* a : w->modelsMenu()->actions())
            if (a->isCheckable()) models << a;
        QCOMPARE(models.size(), 3);
        QVERIFY2(models[0]->text().contains("cannot be read") && !models[0]->isEnabled(),
                 qPrintable(models[0]->text()));
        QVERIFY2(models[1]->text().contains("llama · F32") && models[1]->text().contains("base"),
                 qPrintable(models[1]->text()));
        QVERIFY2(models[2]->text().contains("instruct"), qPrintable(models[2]->text()));
        QSignalSpy ready(w.get(), &MainWindow::modelReadyChanged);
        models[1]->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(ready.count() >= 1, 20000);
        w->scanModels();
        QTRY_VERIFY_WITH_TIMEOUT(scanned.count() == 2, 20000);
        int checked = 0;
        for (QAction* a : w->modelsMenu()->actions())
            if (a->isChecked()) {
                ++checked;
                QCOMPARE(a->data().toString(), dir + "/tiny-base.gguf");
            }
        QCOMPARE(checked, 1);
        if (before.isNull())
            qunsetenv("TOKENSCOPE_MODELS");
        else
            qputenv("TOKENSCOPE_MODELS", before);
    }

    void stoppedReplySaysSo() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        set_max_tokens(w.get(), 2000);
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        int ended_early = 0;
        QVERIFY2(start_streaming_reply(w.get(), done, &ended_early) >= 0,
                 "no reply kept streaming in 8 attempts");
        QTest::keyClick(w->chatView()->input(), Qt::Key_Escape);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == ended_early + 1, 10000);
        const QString text = w->chatView()->messageDocument()->document()->toPlainText();
        QVERIFY2(text.contains("Stopped by you"), qPrintable(text));
        app::ConversationStore store(store_path);
        const auto messages = store.messages(w->currentConversation());
        QCOMPARE(messages[1].finish_reason, QStringLiteral("cancelled"));
        QVERIFY(messages[1].token_count >= 2);
        // After a restart the marker is still there.
        const qint64 id = w->currentConversation();
        w.reset();
        auto again = open_window(store_path, true);
        again->selectConversation(id);
        QVERIFY(again->chatView()->messageDocument()->document()->toPlainText().contains(
            "Stopped by you"));
    }

    // Defect 14: search looks inside messages and says when nothing matches; the status line
    // forgets "Model unchanged" once a reply succeeded.
    void searchFindsMessageTextAndSaysNoResults() {
        const auto store_path = fresh_store();
        auto w = open_window(store_path);
        w->newConversation();
        const qint64 first = w->currentConversation();
        {
            app::ConversationStore store(store_path);
            store.rename(first, "Cooking");
            store.append_message(first, Role::User, "How long do I boil an artichoke?");
        }
        w->newConversation();
        ui::ConversationList* list = w->conversationList();
        QTest::keyClicks(list->searchBox(), "artichoke");
        QTRY_COMPARE(list->visibleIds(), QVector<qint64>{first});
        QVERIFY(!list->emptyLabel()->isVisible());
        list->searchBox()->clear();
        QTest::keyClicks(list->searchBox(), "zzzz-nothing");
        QVERIFY(list->visibleIds().isEmpty());
        QVERIFY(list->emptyLabel()->isVisible());
        QVERIFY(list->emptyLabel()->text().contains("zzzz-nothing"));
    }

    void statusLineRecoversAfterAFailedLoad() {
        auto w = open_window(fresh_store());
        const QString bad =
            QString::fromStdString(test::scratch_dir()) + "/usability-not-a-model.gguf";
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a model");
        f.close();
        w->openModel(bad);
        QMessageBox* box = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((box = w->findChild<QMessageBox*>("errorDialog")) != nullptr,
                                 10000);
        box->accept();
        QVERIFY(w->statusText().contains("unchanged"));
        set_max_tokens(w.get(), 4);
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        w->sendMessage("Still there?");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
        QVERIFY2(!w->statusText().contains("unchanged"), qPrintable(w->statusText()));
        QVERIFY2(w->statusText().contains("template"), qPrintable(w->statusText()));
    }

    // The stall bound holds while 2000 tokens stream through the real window (over several
    // replies when the random model ends one early), each reply saved with its trace.
    void twoThousandTokensKeepTheWindowResponsive() {
        auto w = open_window(fresh_store(), false, QSize(1500, 950), long_model_);
        set_max_tokens(w.get(), 2000);
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        QElapsedTimer total;
        total.start();
        test::StallMeter meter;
        int streamed = 0;
        for (int reply = 0; streamed < 2000 && reply < 20; ++reply) {
            w->sendMessage(reply == 0 ? "Count to a very large number" : "Go on");
            QTRY_VERIFY_WITH_TIMEOUT(done.count() == reply + 1, 300000);
            streamed +=
                int(w->chatView()->message(w->chatView()->messageCount() - 1).tokens.size());
            if (qEnvironmentVariableIsSet("TOKENSCOPE_STALL_LOG"))
                qInfo("reply %d done at %lld ms, %d tokens so far", reply,
                      static_cast<long long>(total.elapsed()), streamed);
        }
        meter.stop();
        qInfo(
            "%d tokens streamed; longest event-loop stall %lld ms of the app's own work or "
            "blocking, %lld ms including preemption (%d gaps over 30 ms put down to preemption)",
            streamed, static_cast<long long>(meter.worstOwn()),
            static_cast<long long>(meter.worst()), meter.preempted());
        QVERIFY2(streamed >= 2000, qPrintable(QString::number(streamed)));
#if defined(__SANITIZE_ADDRESS__)
        qInfo("AddressSanitizer build: the stall bound is not asserted");
#else
        // The 50 ms bound of the chat view (test_chat_view, 2000 tokens: 13-16 ms) and of a
        // 512-token reply in the window (test_main_window) is the target. Over 2000+ tokens of
        // a growing context the GUI thread's longest own iteration measured 38-51 ms with a
        // disk writer (dd conv=fsync) beside it (2026-12-01); it was 152-161 ms before commits
        // stopped fsyncing on the GUI thread (WalSyncer). Asserted at 75 ms for CI's noise.
        if (meter.worstOwn() > 50)
            qWarning("over the 50 ms target: %lld ms", static_cast<long long>(meter.worstOwn()));
        QVERIFY2(meter.worstOwn() <= 75, qPrintable(QString::number(meter.worstOwn())));
#endif
        // The view followed the answer to its end.
        QScrollBar* bar = w->chatView()->transcript()->verticalScrollBar();
        QTRY_COMPARE(bar->value(), bar->maximum());
    }
};

QTEST_MAIN(TestWindowUsability)
#include "test_window_usability.moc"
