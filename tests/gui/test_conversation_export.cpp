// Conversations out and in (issue 19): a conversation with a reply's token trace exported to
// JSON and imported into another database comes back field for field (the trace included, so
// the reply stays inspectable); Markdown holds the text under role headings; bad files are
// refused with the place of the problem and import nothing; the window's File menu does it
// end to end on a real reply.
#include <QMenuBar>
#include <QMessageBox>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "chat_view.h"
#include "conversation_export.h"
#include "conversation_store.h"
#include "main_window.h"
#include "reference/tiny_model.h"
#include "util/test_paths.h"
#include "window_fixture.h"

using namespace tokenscope;
using namespace tokenscope::app;

namespace {
QList<TraceToken> sample_trace() {
    TraceToken a;
    a.id = 17;
    a.text = "Hel";
    a.probability = 0.75f;
    a.logprob = -0.2876821f;
    a.before = {{17, "Hel", 0.5f, 3.25f}, {9, "Hi", 0.25f, 2.5f}};
    a.after = {{17, "Hel", 0.75f, 3.25f}};
    TraceToken b;
    b.id = 18;
    b.text = "lo ```code```";
    b.probability = 0.125f;
    b.logprob = -2.0794415f;
    b.origin = 2;
    b.before = {{18, "lo", 0.125f, 1.0f}};
    return {a, b};
}
}  // namespace

class TestConversationExport : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    qint64 fill(ConversationStore& store) {
        const qint64 id =
            store.create_conversation("Greetings & \"quotes\"", "Be brief.", "/models/m.gguf");
        store.append_message(id, Role::User, "Say hello\nin two lines");
        const qint64 reply =
            store.append_reply(id, "Hello ```code```", true, {"eos", 2, 41.5, 120.25});
        store.set_token_trace(reply, sample_trace());
        store.append_message(id, Role::User, "And again — ünïcödé 🙂");
        // Regenerated once: version 1 (with its trace) kept, version 2 on show.
        const qint64 first = store.append_reply(id, "First try", true, {"eos", 2, 12.0, 9.0});
        store.set_token_trace(first, sample_trace());
        const int next = store.keep_reply_version(first);
        store.truncate_after(id, 2);
        const qint64 second = store.append_reply(id, "Hel", false, {"cancelled", 1, 0.0, 80.0});
        store.set_reply_version(second, next);
        return id;
    }

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(dir_.isValid());
    }

    void jsonRoundTrip() {
        ConversationStore a((dir_.path() + "/a.sqlite").toStdString());
        const qint64 id = fill(a);
        const QByteArray json = conversations_json(a, {id});
        ConversationStore b((dir_.path() + "/b.sqlite").toStdString());
        const ImportResult r = import_conversations_json(b, json);
        QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
        QCOMPARE(r.conversations.size(), 1);
        const auto ca = a.conversation(id), cb = b.conversation(r.conversations[0]);
        QCOMPARE(cb->title, ca->title);
        QCOMPARE(cb->system_prompt, ca->system_prompt);
        QCOMPARE(cb->model_path, ca->model_path);
        const auto ma = a.messages(id), mb = b.messages(r.conversations[0]);
        QCOMPARE(mb.size(), 4);
        for (int i = 0; i < ma.size(); ++i) {
            QCOMPARE(mb[i].role, ma[i].role);
            QCOMPARE(mb[i].content, ma[i].content);
            QCOMPARE(mb[i].complete, ma[i].complete);
            QCOMPARE(mb[i].token_count, ma[i].token_count);
            QCOMPARE(mb[i].finish_reason, ma[i].finish_reason);
            QCOMPARE(mb[i].decode_tokens_per_s, ma[i].decode_tokens_per_s);
            QCOMPARE(mb[i].ttft_ms, ma[i].ttft_ms);
            QCOMPARE(b.token_trace(mb[i].id), a.token_trace(ma[i].id));
        }
        QCOMPARE(b.token_trace(mb[1].id), sample_trace());  // floats exact through JSON
        // The regenerated reply: shown version 2 of 2, and version 1 with its trace.
        QCOMPARE(mb[3].version, 2);
        QCOMPARE(mb[3].versions, 2);
        const QList<ReplyVersion> kept = b.reply_versions(r.conversations[0], 3);
        QCOMPARE(kept.size(), 1);
        QCOMPARE(kept[0].ordinal, 1);
        QCOMPARE(kept[0].content, QString("First try"));
        QCOMPARE(kept[0].finish_reason, QString("eos"));
        QCOMPARE(kept[0].trace, sample_trace());
        // Exporting the import gives the same conversations (timestamps aside).
        const QByteArray again = conversations_json(b, r.conversations);
        const auto strip = [](QByteArray j) {
            QJsonObject o = QJsonDocument::fromJson(j).object();
            QJsonArray list = o["conversations"].toArray();
            for (auto&& c : list) {
                QJsonObject co = c.toObject();
                co.remove("created_at");
                co.remove("updated_at");
                c = co;
            }
            return list;
        };
        QCOMPARE(strip(again), strip(json));
    }

    void markdownReadsAsTheConversation() {
        ConversationStore a((dir_.path() + "/md.sqlite").toStdString());
        const qint64 id = fill(a);
        const QString md = conversation_markdown(a, id);
        QVERIFY(md.startsWith("# Greetings & \"quotes\"\n"));
        QVERIFY(md.contains("**System:** Be brief."));
        QVERIFY(md.contains("## You\n\nSay hello\nin two lines\n"));
        QVERIFY(md.contains("## Assistant\n\nHello ```code```\n"));
        QVERIFY(md.contains("*2 tokens · 41.5 tok/s*"));
        QVERIFY(md.contains("stopped before the end"));
        QVERIFY(md.contains(QString::fromUtf8("ünïcödé 🙂")));
        QVERIFY(md.indexOf("## You") < md.indexOf("## Assistant"));
    }

    void badFilesImportNothing_data() {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QString>("error");
        QTest::newRow("not json") << QByteArray("{\"format\": ") << "not JSON";
        QTest::newRow("other format")
            << QByteArray(R"({"format": "chatgpt", "version": 1})") << "not a tokenscope export";
        QTest::newRow("future version")
            << QByteArray(R"({"format": "tokenscope.conversations", "version": 7})") << "version 7";
        QTest::newRow("bad role") << QByteArray(R"({"format": "tokenscope.conversations",
            "version": 1, "conversations": [{"title": "ok", "messages": []},
            {"title": "t", "messages": [{"role": "user", "content": "a"},
                                        {"role": "robot", "content": "b"}]}]})")
                                  << "conversations[1].messages[1].role: 'robot' is not";
        QTest::newRow("bad trace") << QByteArray(R"({"format": "tokenscope.conversations",
            "version": 1, "conversations": [{"title": "t", "messages": [{"role": "assistant",
            "content": "a", "trace": [{"id": 1, "text": "a", "before": [{"id": "x"}]}]}]}]})")
                                   << "conversations[0].messages[0].trace[0].before[0].id";
        QTest::newRow("no title") << QByteArray(
                                         R"({"format": "tokenscope.conversations", "version": 1,
            "conversations": [{"messages": []}]})")
                                  << "conversations[0].title: must be a string";
    }
    void badFilesImportNothing() {
        QFETCH(QByteArray, json);
        QFETCH(QString, error);
        ConversationStore s((dir_.path() + "/bad.sqlite").toStdString());
        const int before = int(s.conversations().size());
        const ImportResult r = import_conversations_json(s, json);
        QVERIFY2(r.error.contains(error), qPrintable(r.error));
        QVERIFY(r.conversations.isEmpty());
        QCOMPARE(int(s.conversations().size()), before);
    }

    // The window: a real reply exported to JSON, imported back as a second conversation that
    // shows the same messages, and the reply's tokens are there to inspect.
    void windowExportsAndImports() {
        const QString model =
            QString::fromStdString(test::tiny_model_path("export_llama", test::TinyModelSpec{}));
        auto w = test::open_main_window(model, dir_.path() + "/window.sqlite");
        QVERIFY(w->modelReady());
        QSignalSpy done(w.get(), &MainWindow::generationDone);
        w->sendMessage("Tell me something");
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000);
        QVERIFY(test::find_menu_action(*w, "Export conversation"));
        QVERIFY(test::find_menu_action(*w, "Import conversations"));
        const QString json = dir_.path() + "/one.json", md = dir_.path() + "/one.md";
        QVERIFY(w->exportConversationTo(json));
        QVERIFY(w->exportConversationTo(md));
        QVERIFY(QFile(md).size() > 0);
        const QString reply = w->chatView()->message(1).text;
        const int tokens = int(w->chatView()->message(1).tokens.size());
        QVERIFY(tokens > 0);
        const qint64 original = w->currentConversation();
        QVERIFY(w->importConversationsFrom(json));
        QVERIFY(w->currentConversation() != original);  // the imported copy is on screen
        QCOMPARE(w->chatView()->messageCount(), 2);
        QCOMPARE(w->chatView()->message(1).text, reply);
        QCOMPARE(int(w->chatView()->message(1).tokens.size()), tokens);  // inspectable
        // A file that is not an export: refused, and said so.
        QFile junk(dir_.path() + "/junk.json");
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write("[1, 2, 3]");
        junk.close();
        QVERIFY(!w->importConversationsFrom(junk.fileName()));
        auto* box = w->findChild<QMessageBox*>("errorDialog");
        QVERIFY(box);
        QVERIFY2(box->text().contains("not a tokenscope export"), qPrintable(box->text()));
    }
};

QTEST_MAIN(TestConversationExport)
#include "test_conversation_export.moc"
