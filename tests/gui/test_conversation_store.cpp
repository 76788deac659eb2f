// ConversationStore: round trips, cascades, literal search, truncation, WAL, bad files, and a
// writer process killed with SIGKILL mid-write losing nothing it had reported as committed.
#include "conversation_store.h"
#include "store_writer_protocol.h"
#include "trace_writer.h"
#include "util/error.h"
#include "wal_syncer.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#ifndef _WIN32
#include <unistd.h>
#endif

using tokenscope::app::ConversationStore;
using tokenscope::app::Message;
using tokenscope::app::Role;
using tokenscope::app::TraceCandidate;
using tokenscope::app::TraceToken;

namespace {

// A plain connection of the test's own, to look at the file behind the store's back.
class RawDb {
  public:
    explicit RawDb(const QString& path) : name_(QStringLiteral("raw-%1").arg(++counter_)) {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name_);
        db.setDatabaseName(path);
        db.open();
    }
    ~RawDb() {
        QSqlDatabase::database(name_, false).close();
        QSqlDatabase::removeDatabase(name_);
    }
    // The first column of the first row, or an invalid QVariant on error.
    QVariant scalar(const QString& sql) {
        QSqlQuery query(QSqlDatabase::database(name_, false));
        if (!query.exec(sql)) {
            qWarning("%s: %s", qPrintable(sql), qPrintable(query.lastError().text()));
            return {};
        }
        return query.next() ? query.value(0) : QVariant();
    }
    bool exec(const QString& sql) {
        QSqlQuery query(QSqlDatabase::database(name_, false));
        return query.exec(sql);
    }

  private:
    static inline int counter_ = 0;
    QString name_;
};

// The what() of the exception of type E that `action` throws, or "" when it throws none.
template <typename E>
QString error_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const E& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

}  // namespace

class TestConversationStore : public QObject {
    Q_OBJECT

  private:
    QTemporaryDir dir_;
    int file_counter_ = 0;
    // A fresh database path in a folder that does not exist yet (the store creates it).
    std::filesystem::path fresh_path() {
        return std::filesystem::path(dir_.path().toStdString()) /
               ("case" + std::to_string(++file_counter_)) / "conversations.sqlite";
    }

  private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void defaultPathIsUnderTheXdgDataDir() {
        qputenv("XDG_DATA_HOME", "/tmp/xdg-data-test");
        QCOMPARE(QString::fromStdString(ConversationStore::default_path().string()),
                 QStringLiteral("/tmp/xdg-data-test/tokenscope/conversations.sqlite"));
        qunsetenv("XDG_DATA_HOME");
    }

    void roundTripThroughANewInstance() {
        const auto path = fresh_path();
        const QString unicode = QStringLiteral(
            "Grüße, 世界! 🌍👩‍👩‍👧 שלום e\u0301 \t\"quotes\" 'x'\n");
        QString long_text;
        for (int i = 0; i < 20000; ++i) long_text += QStringLiteral("line %1 ✓\n").arg(i);

        qint64 a = 0, b = 0;
        QList<Message> written_a, written_b;
        {
            ConversationStore store(path);
            a = store.create_conversation(QStringLiteral("First ✨"), QString());
            b = store.create_conversation(QStringLiteral("Second"), unicode,
                                          QStringLiteral("/models/m.gguf"));
            store.append_message(a, Role::System, QStringLiteral("be brief"));
            store.append_message(a, Role::User, unicode);
            store.append_message(a, Role::Assistant, long_text, true, 12345);
            store.append_message(a, Role::User, QString());  // empty message
            store.append_message(b, Role::User, QStringLiteral("hi"));
            store.append_message(b, Role::Assistant, QStringLiteral("partial ans"), false, 3);
            written_a = store.messages(a);
            written_b = store.messages(b);
            // A second instance on the same file while the first is open sees the commits.
            ConversationStore other(path);
            QCOMPARE(other.messages(a), written_a);
        }
        QCOMPARE(written_a.size(), 4);
        ConversationStore store(path);
        const QList<Message> read_a = store.messages(a);
        QCOMPARE(read_a, written_a);
        QCOMPARE(store.messages(b), written_b);

        QCOMPARE(read_a[0].role, Role::System);
        QCOMPARE(read_a[1].content, unicode);
        QCOMPARE(read_a[2].content, long_text);
        QCOMPARE(read_a[2].token_count, 12345);
        QVERIFY(read_a[3].content.isEmpty());
        for (int i = 0; i < read_a.size(); ++i) QCOMPARE(read_a[i].position, i);
        QVERIFY(!store.messages(b)[1].complete);

        const auto conv_a = store.conversation(a);
        QVERIFY(conv_a);
        QCOMPARE(conv_a->title, QStringLiteral("First ✨"));
        QVERIFY(conv_a->system_prompt.isEmpty());
        QVERIFY(conv_a->model_path.isEmpty());
        const auto conv_b = store.conversation(b);
        QCOMPARE(conv_b->system_prompt, unicode);
        QCOMPARE(conv_b->model_path, QStringLiteral("/models/m.gguf"));
        QVERIFY(conv_b->created_at.isValid());
        QVERIFY(conv_b->updated_at >= conv_b->created_at);
        QVERIFY(!store.conversation(b + 100));
    }

    void renameSystemPromptAndOrder() {
        ConversationStore store(fresh_path());
        const qint64 a = store.create_conversation(QStringLiteral("A"), QString());
        const qint64 b = store.create_conversation(QStringLiteral("B"), QString());
        QCOMPARE(store.conversations().size(), 2);
        QCOMPARE(store.conversations()[0].id, b);  // most recent first

        store.rename(a, QStringLiteral("A renamed"));
        QCOMPARE(store.conversations()[0].id, a);
        QCOMPARE(store.conversations()[0].title, QStringLiteral("A renamed"));

        store.append_message(b, Role::User, QStringLiteral("hello"));
        QCOMPARE(store.conversations()[0].id, b);

        store.set_system_prompt(a, QStringLiteral("You are terse."));
        store.set_model_path(a, QStringLiteral("/m.gguf"));
        QCOMPARE(store.conversation(a)->system_prompt, QStringLiteral("You are terse."));
        QCOMPARE(store.conversation(a)->model_path, QStringLiteral("/m.gguf"));
        QCOMPARE(store.conversations()[0].id, a);
    }

    void deleteCascadesToMessagesAndTraces() {
        const auto path = fresh_path();
        ConversationStore store(path);
        const qint64 keep = store.create_conversation(QStringLiteral("keep"), QString());
        const qint64 gone = store.create_conversation(QStringLiteral("gone"), QString());
        store.append_message(keep, Role::User, QStringLiteral("k"));
        store.append_message(gone, Role::User, QStringLiteral("g1"));
        const qint64 answer = store.append_message(gone, Role::Assistant, QStringLiteral("g2"));
        store.set_token_trace(answer,
                              {TraceToken{1, QStringLiteral("g2"), 0.5f, -0.7f, {}, {}, 0}});

        store.delete_conversation(gone);
        QVERIFY(!store.conversation(gone));
        QVERIFY(store.messages(gone).isEmpty());
        QVERIFY(store.token_trace(answer).isEmpty());
        QCOMPARE(store.conversations().size(), 1);
        QCOMPARE(store.messages(keep).size(), 1);

        RawDb raw(QString::fromStdString(path.string()));
        QCOMPARE(raw.scalar(QStringLiteral("SELECT count(*) FROM messages")).toInt(), 1);
        QCOMPARE(raw.scalar(QStringLiteral("SELECT count(*) FROM message_traces")).toInt(), 0);

        QVERIFY(error_of<tokenscope::InvalidArgument>([&] {
                    store.delete_conversation(gone);
                }).contains(QStringLiteral("no conversation")));
    }

    void searchTreatsWildcardsLiterally() {
        ConversationStore store(fresh_path());
        const qint64 percent = store.create_conversation(QStringLiteral("100% Done"), QString());
        const qint64 plain = store.create_conversation(QStringLiteral("100 percent"), QString());
        const qint64 snake = store.create_conversation(QStringLiteral("code"), QString());
        const qint64 backslash = store.create_conversation(QStringLiteral("paths"), QString());
        store.append_message(snake, Role::User, QStringLiteral("rename it to snake_case"));
        store.append_message(plain, Role::User, QStringLiteral("snakeXcase and snake case"));
        store.append_message(backslash, Role::Assistant, QStringLiteral("C:\\Users\\me"));

        auto ids = [&](const QString& text) {
            QList<qint64> list;
            for (const auto& summary : store.search(text)) list.append(summary.id);
            std::sort(list.begin(), list.end());
            return list;
        };
        QCOMPARE(ids(QStringLiteral("%")), QList<qint64>{percent});
        QCOMPARE(ids(QStringLiteral("0% d")), QList<qint64>{percent});  // case-insensitive
        QCOMPARE(ids(QStringLiteral("_")), QList<qint64>{snake});
        QCOMPARE(ids(QStringLiteral("e_c")), QList<qint64>{snake});
        QCOMPARE(ids(QStringLiteral("\\")), QList<qint64>{backslash});
        QCOMPARE(ids(QStringLiteral("\\U")), QList<qint64>{backslash});
        QCOMPARE(ids(QStringLiteral("snake")), (QList<qint64>{plain, snake}));
        QCOMPARE(ids(QStringLiteral("nothing like this")), QList<qint64>{});
        QCOMPARE(ids(QStringLiteral("'; DROP TABLE messages; --")), QList<qint64>{});
        QCOMPARE(store.search(QString()).size(), 4);
    }

    void truncateAfterDropsWhatFollowed() {
        ConversationStore store(fresh_path());
        const qint64 c = store.create_conversation(QStringLiteral("t"), QString());
        for (int i = 0; i < 5; ++i) store.append_message(c, Role::User, QString::number(i));
        QCOMPARE(store.truncate_after(c, 1), 3);
        QList<Message> list = store.messages(c);
        QCOMPARE(list.size(), 2);
        QCOMPARE(list[1].content, QStringLiteral("1"));
        store.append_message(c, Role::User, QStringLiteral("edited"));
        list = store.messages(c);
        QCOMPARE(list.size(), 3);
        QCOMPARE(list[2].position, 2);
        QCOMPARE(list[2].content, QStringLiteral("edited"));
        QCOMPARE(store.truncate_after(c, -1), 3);  // everything
        QVERIFY(store.messages(c).isEmpty());
    }

    void updateMessageForTheStreamingAnswer() {
        ConversationStore store(fresh_path());
        const qint64 c = store.create_conversation(QStringLiteral("u"), QString());
        store.append_message(c, Role::User, QStringLiteral("question"));
        const qint64 id = store.append_message(c, Role::Assistant, QString(), false);
        store.update_message(id, QStringLiteral("half an ans"), false, 4);  // Stop pressed
        QCOMPARE(store.messages(c)[1].content, QStringLiteral("half an ans"));
        QVERIFY(!store.messages(c)[1].complete);
        QCOMPARE(store.messages(c)[1].token_count, 4);
        store.update_message(id, QStringLiteral("half an answer, continued"), true);
        QVERIFY(store.messages(c)[1].complete);
        QCOMPARE(store.messages(c)[1].token_count, 4);  // not given: kept
        QCOMPARE(store.messages(c)[1].position, 1);
    }

    void missingIdsAreRejectedAndRolledBack() {
        ConversationStore store(fresh_path());
        const qint64 c = store.create_conversation(QStringLiteral("x"), QString());
        QVERIFY(!error_of<tokenscope::InvalidArgument>([&] {
                     store.append_message(c + 1, Role::User, QStringLiteral("lost?"));
                 }).isEmpty());
        QVERIFY(!error_of<tokenscope::InvalidArgument>([&] {
                     store.update_message(999, QStringLiteral("x"), true);
                 }).isEmpty());
        QVERIFY(!error_of<tokenscope::InvalidArgument>([&] {
                     store.rename(c + 1, QStringLiteral("x"));
                 }).isEmpty());
        QVERIFY(!error_of<tokenscope::InvalidArgument>([&] {
                     store.set_token_trace(999, {});
                 }).isEmpty());
        // Each failure rolled its transaction back: the next write starts a fresh one.
        store.append_message(c, Role::User, QStringLiteral("still works"));
        QCOMPARE(store.messages(c).size(), 1);
    }

    void walModeIsActive() {
        const auto path = fresh_path();
        ConversationStore store(path);
        QCOMPARE(store.journal_mode(), QStringLiteral("wal"));
        // Persistent: a plain connection sees WAL too.
        RawDb raw(QString::fromStdString(path.string()));
        QCOMPARE(raw.scalar(QStringLiteral("PRAGMA journal_mode")).toString(),
                 QStringLiteral("wal"));
        QCOMPARE(raw.scalar(QStringLiteral("SELECT version FROM schema_version")).toInt(),
                 ConversationStore::kSchemaVersion);
    }

    void badFilesGiveAClearError() {
        const QStringList before = QSqlDatabase::connectionNames();
        auto open_error = [](const std::filesystem::path& path) {
            const QString error =
                error_of<tokenscope::IoError>([&] { ConversationStore store(path); });
            qInfo("%s", qPrintable(error));  // the log shows what a user would read
            return error;
        };
        auto write_file = [](const std::filesystem::path& path, const QByteArray& bytes) {
            std::filesystem::create_directories(path.parent_path());
            QFile file(QString::fromStdString(path.string()));
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write(bytes);
        };

        const auto text = fresh_path();
        write_file(text, QByteArray("just some notes, not a database\n"));
        QString error = open_error(text);
        QVERIFY2(error.contains(QString::fromStdString(text.string())), qPrintable(error));
        QVERIFY2(error.contains(QStringLiteral("not a database")), qPrintable(error));

        const auto garbage = fresh_path();
        QByteArray noise(64 * 1024, '\0');
        for (int i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 7919) >> 3);
        write_file(garbage, noise);
        error = open_error(garbage);
        QVERIFY2(error.contains(QStringLiteral("not a database")), qPrintable(error));

        // A store whose header was damaged after the fact.
        const auto damaged = fresh_path();
        {
            ConversationStore store(damaged);
            store.create_conversation(QStringLiteral("soon damaged"), QString());
        }
        {
            QFile file(QString::fromStdString(damaged.string()));
            QVERIFY(file.open(QIODevice::ReadWrite));
            file.write("XXXXXXXXXXXXXXXX");
        }
        error = open_error(damaged);
        QVERIFY2(!error.isEmpty(), "a damaged header opened without an error");

        const auto directory = fresh_path();
        std::filesystem::create_directories(directory);
        error = open_error(directory);
        QVERIFY2(error.contains(QStringLiteral("directory")), qPrintable(error));

        // Someone else's SQLite database is left alone.
        const auto foreign = fresh_path();
        std::filesystem::create_directories(foreign.parent_path());
        {
            RawDb raw(QString::fromStdString(foreign.string()));
            QVERIFY(raw.exec(QStringLiteral("CREATE TABLE photos (id INTEGER)")));
        }
        error = open_error(foreign);
        QVERIFY2(error.contains(QStringLiteral("not a tokenscope")), qPrintable(error));

        // A schema from the future is not migrated "down".
        const auto newer = fresh_path();
        { ConversationStore store(newer); }
        {
            RawDb raw(QString::fromStdString(newer.string()));
            QVERIFY(raw.exec(QStringLiteral("UPDATE schema_version SET version = 99")));
        }
        error = open_error(newer);
        QVERIFY2(error.contains(QStringLiteral("newer")), qPrintable(error));

        // Failed opens leave no Qt SQL connection behind.
        QCOMPARE(QSqlDatabase::connectionNames(), before);
    }

    void tokenTraceRoundTrip() {
        ConversationStore store(fresh_path());
        const qint64 c = store.create_conversation(QStringLiteral("trace"), QString());
        const qint64 id = store.append_message(c, Role::Assistant, QStringLiteral("Hi 🌍"));
        const QList<TraceToken> trace = {
            {17,
             QStringLiteral("Hi"),
             0.75f,
             -0.2876f,
             {TraceCandidate{17, QStringLiteral("▁Hi"), 0.75f},
              TraceCandidate{42, QStringLiteral("▁Hello"), 0.2f}},
             {},
             0},
            {99, QStringLiteral(" 🌍"), 1.0f, 0.0f, {}, {}, 0},
            {5, QString(), 0.01f, -4.6f, {TraceCandidate{0, QString(), 0.0f}}, {}, 0},
        };
        store.set_token_trace(id, trace);
        QCOMPARE(store.token_trace(id), trace);
        store.set_token_trace(id, {});  // replaced
        QVERIFY(store.token_trace(id).isEmpty());

        // Damaged bytes are a FormatError, never a crash or a huge allocation.
        const QByteArray bytes = tokenscope::app::encode_token_trace(trace);
        for (int cut = 0; cut < bytes.size(); ++cut) {
            QVERIFY(!error_of<tokenscope::FormatError>([&] {
                         tokenscope::app::decode_token_trace(bytes.left(cut));
                     }).isEmpty());
        }
        QByteArray huge_count = bytes;
        huge_count[6] = '\xff';
        huge_count[9] = '\x7f';
        QVERIFY(!error_of<tokenscope::FormatError>([&] {
                     tokenscope::app::decode_token_trace(huge_count);
                 }).isEmpty());
        QVERIFY(!error_of<tokenscope::FormatError>([&] {
                     tokenscope::app::decode_token_trace(bytes + "x");
                 }).isEmpty());
    }

    // Version 2 keeps both candidate lists, with logits: the chat can explain any old reply.
    void tokenTraceKeepsBeforeAndAfter() {
        ConversationStore store(fresh_path());
        const qint64 c = store.create_conversation(QStringLiteral("trace v2"), QString());
        const qint64 id = store.append_message(c, Role::Assistant, QStringLiteral(" Paris"));
        TraceToken token;
        token.id = 1234;
        token.text = QStringLiteral(" Paris");
        token.probability = 0.9f;
        token.logprob = -0.5f;
        token.before = {TraceCandidate{1234, QStringLiteral(" Paris"), 0.6f, 12.5f},
                        TraceCandidate{99, QStringLiteral(" Lyon"), 0.3f, 11.8f}};
        token.after = {TraceCandidate{1234, QStringLiteral(" Paris"), 0.9f, 12.5f}};
        store.set_token_trace(id, {token});
        const QList<TraceToken> back = store.token_trace(id);
        QCOMPARE(back.size(), 1);
        QCOMPARE(back[0], token);
        QCOMPARE(back[0].after.size(), 1);
        QCOMPARE(back[0].before[1].logit, 11.8f);
    }

    // Version 3 keeps how speculative decoding produced each token (the chat's underline).
    void tokenTraceKeepsOrigin() {
        ConversationStore store(fresh_path());
        const qint64 c = store.create_conversation(QStringLiteral("trace v3"), QString());
        const qint64 id = store.append_message(c, Role::Assistant, QStringLiteral("ab"));
        TraceToken plain{1, QStringLiteral("a"), 1.0f, 0.0f, {}, {}};
        TraceToken accepted = plain;
        accepted.id = 2;
        accepted.origin = 1;
        TraceToken bonus = plain;
        bonus.origin = 3;
        store.set_token_trace(id, {plain, accepted, bonus});
        const QList<TraceToken> back = store.token_trace(id);
        QCOMPARE(back.size(), 3);
        QCOMPARE(back[0].origin, quint8{0});
        QCOMPARE(back[1].origin, quint8{1});
        QCOMPARE(back[2].origin, quint8{3});
        // The window's token data keeps its origin through the stored form.
        tokenscope::ui::TokenData shown;
        shown.id = 2;
        shown.origin = tokenscope::ui::TokenOrigin::Accepted;
        QCOMPARE(tokenscope::app::trace_from_token(shown).origin, quint8{1});
        QCOMPARE(tokenscope::app::token_from_trace(back[1]).origin,
                 tokenscope::ui::TokenOrigin::Accepted);
        QCOMPARE(tokenscope::app::token_from_trace(back[2]).origin,
                 tokenscope::ui::TokenOrigin::Bonus);
        // An origin this build does not know is named, with its offset: the last byte.
        QByteArray bytes = tokenscope::app::encode_token_trace({accepted});
        QCOMPARE(static_cast<int>(bytes.back()), 1);
        bytes.back() = 7;
        const QString error =
            error_of<tokenscope::FormatError>([&] { tokenscope::app::decode_token_trace(bytes); });
        QVERIFY2(error.contains(QStringLiteral("origin 7")) &&
                     error.contains(QStringLiteral("offset ") + QString::number(bytes.size() - 1)),
                 qPrintable(error));
    }

    // Rows written by the previous build (version 2: both lists with logits, no origin) still
    // read, as plain tokens. Spelled out by hand from the format comment.
    void version2TraceStillReads() {
        QByteArray v2("TSTR", 4);
        auto u16 = [&](quint16 v) { v2.append(char(v & 0xff)).append(char(v >> 8)); };
        auto u32 = [&](quint32 v) {
            for (int i = 0; i < 4; ++i) v2.append(char((v >> (8 * i)) & 0xff));
        };
        auto f32 = [&](float f) {
            quint32 bits;
            std::memcpy(&bits, &f, 4);
            u32(bits);
        };
        u16(2);       // version
        u32(1);       // one token
        u32(7);       // id
        f32(0.5f);    // probability
        f32(-0.69f);  // logprob
        u32(1);
        v2.append("a");
        u32(0);  // before: none
        u32(1);  // after: one candidate
        u32(7);
        u32(1);
        v2.append("a");
        f32(0.5f);
        f32(3.25f);  // its logit
        const QList<TraceToken> trace = tokenscope::app::decode_token_trace(v2);
        QCOMPARE(trace.size(), 1);
        QCOMPARE(trace[0].after.size(), 1);
        QCOMPARE(trace[0].after[0].logit, 3.25f);
        QCOMPARE(trace[0].origin, quint8{0});
    }

    // Rows written by the previous build (trace version 1: one list, no logits) still read.
    // The bytes are spelled out by hand from the format comment, not produced by the encoder.
    void version1TraceStillReads() {
        QByteArray v1("TSTR", 4);
        auto u16 = [&](quint16 v) { v1.append(char(v & 0xff)).append(char(v >> 8)); };
        auto u32 = [&](quint32 v) {
            for (int i = 0; i < 4; ++i) v1.append(char((v >> (8 * i)) & 0xff));
        };
        auto f32 = [&](float f) {
            quint32 bits;
            std::memcpy(&bits, &f, 4);
            u32(bits);
        };
        u16(1);       // version
        u32(1);       // one token
        u32(7);       // id
        f32(0.5f);    // probability
        f32(-0.69f);  // logprob
        u32(2);
        v1.append("ab");
        u32(1);  // one candidate
        u32(3);
        u32(1);
        v1.append("x");
        f32(0.25f);
        const QList<TraceToken> trace = tokenscope::app::decode_token_trace(v1);
        QCOMPARE(trace.size(), 1);
        QCOMPARE(trace[0].id, 7);
        QCOMPARE(trace[0].text, QStringLiteral("ab"));
        QCOMPARE(trace[0].probability, 0.5f);
        QCOMPARE(trace[0].before.size(), 1);
        QCOMPARE(trace[0].before[0], (TraceCandidate{3, QStringLiteral("x"), 0.25f, 0.0f}));
        QVERIFY(trace[0].after.isEmpty());
        // A version this build does not know is named in the error.
        QByteArray v9 = v1;
        v9[4] = 9;
        const QString error =
            error_of<tokenscope::FormatError>([&] { tokenscope::app::decode_token_trace(v9); });
        QVERIFY2(error.contains(QStringLiteral("version 9")), qPrintable(error));
    }

    // Alternative replies: each regenerated reply keeps the one it replaced as a version;
    // selecting a version swaps text, statistics and token trace with the message, numbering
    // stays 1..n, a bad version number changes nothing, editing an earlier message drops them,
    // and all of it survives reopening the file.
    void replyVersions() {
        const auto path = fresh_path();
        ConversationStore store(path);
        const qint64 c = store.create_conversation("versions");
        store.append_message(c, Role::User, "Question");
        const qint64 a = store.append_reply(c, "Answer A", true, {"eos", 2, 10.0, 5.0});
        TraceToken t;
        t.id = 5;
        t.text = "Answer A";
        t.probability = 0.5f;
        store.set_token_trace(a, {t});
        QCOMPARE(store.messages(c).last().versions, 0);  // never regenerated

        QCOMPARE(store.keep_reply_version(a), 2);
        store.truncate_after(c, 0);
        const qint64 b = store.append_reply(c, "Answer B", true, {"max_tokens", 3, 20.0, 6.0});
        store.set_reply_version(b, 2);
        QCOMPARE(store.keep_reply_version(b), 3);
        store.truncate_after(c, 0);
        const qint64 d = store.append_reply(c, "Answer C", false, {"cancelled", 1, 0.0, 7.0});
        store.set_reply_version(d, 3);
        Message m = store.messages(c).last();
        QCOMPARE(m.content, QString("Answer C"));
        QCOMPARE(m.version, 3);
        QCOMPARE(m.versions, 3);

        store.select_reply_version(d, 1);
        m = store.messages(c).last();
        QCOMPARE(m.id, d);  // the same message, showing version 1
        QCOMPARE(m.content, QString("Answer A"));
        QCOMPARE(m.finish_reason, QString("eos"));
        QCOMPARE(m.token_count, 2);
        QVERIFY(m.complete);
        QCOMPARE(m.version, 1);
        QCOMPARE(m.versions, 3);
        QCOMPARE(store.token_trace(d), QList<TraceToken>{t});
        store.select_reply_version(d, 3);
        m = store.messages(c).last();
        QCOMPARE(m.content, QString("Answer C"));
        QVERIFY(!m.complete);
        QVERIFY(store.token_trace(d).isEmpty());  // C had no trace
        store.select_reply_version(d, 2);
        QCOMPARE(store.messages(c).last().content, QString("Answer B"));
        QVERIFY(error_of<tokenscope::InvalidArgument>([&] {
                    store.select_reply_version(d, 9);
                }).contains("no version 9"));
        QCOMPARE(store.messages(c).last().content, QString("Answer B"));
        QCOMPARE(store.messages(c).last().versions, 3);

        {
            ConversationStore reopened(path);
            const Message again = reopened.messages(c).last();
            QCOMPARE(again.content, QString("Answer B"));
            QCOMPARE(again.version, 2);
            QCOMPARE(again.versions, 3);
        }
        store.drop_reply_versions_after(c, 0);
        QCOMPARE(store.messages(c).last().versions, 0);
    }

    void replyStatsRoundTrip() {
        ConversationStore store(fresh_path());
        const qint64 c = store.create_conversation(QStringLiteral("stats"), QString());
        store.append_message(c, Role::User, QStringLiteral("Hi"));
        const qint64 id = store.append_message(c, Role::Assistant, QStringLiteral("Hello"), false);
        store.set_reply_stats(id, {QStringLiteral("cancelled"), 17, 42.5, 130.25});
        const QList<Message> list = store.messages(c);
        QCOMPARE(list[0].finish_reason, QString());
        QCOMPARE(list[1].finish_reason, QStringLiteral("cancelled"));
        QCOMPARE(list[1].token_count, 17);
        QCOMPARE(list[1].decode_tokens_per_s, 42.5);
        QCOMPARE(list[1].ttft_ms, 130.25);
        QVERIFY(!error_of<tokenscope::InvalidArgument>([&] {
                     store.set_reply_stats(999, {});
                 }).isEmpty());
        // append_reply: the same row in one transaction, at the next position.
        const qint64 reply = store.append_reply(c, QStringLiteral("Again"), true,
                                                {QStringLiteral("eos"), 4, 12.5, 9.0});
        const QList<Message> again = store.messages(c);
        QCOMPARE(again.size(), 3);
        QCOMPARE(again[2].id, reply);
        QCOMPARE(again[2].position, 2);
        QCOMPARE(again[2].role, Role::Assistant);
        QCOMPARE(again[2].content, QStringLiteral("Again"));
        QCOMPARE(again[2].finish_reason, QStringLiteral("eos"));
        QCOMPARE(again[2].token_count, 4);
        QCOMPARE(again[2].decode_tokens_per_s, 12.5);
        QCOMPARE(again[2].ttft_ms, 9.0);
    }

    // A database written by schema 1 (the previous release) gains the new columns and keeps
    // its messages. The schema-1 tables are created by hand here, as that release did.
    void schema1DatabaseMigrates() {
        const auto path = fresh_path();
        std::filesystem::create_directories(path.parent_path());
        {
            RawDb raw(QString::fromStdString(path.string()));
            QVERIFY(raw.exec(QStringLiteral(
                "CREATE TABLE conversations (id INTEGER PRIMARY KEY, title TEXT NOT NULL DEFAULT "
                "'',"
                " system_prompt TEXT NOT NULL DEFAULT '', model_path TEXT NOT NULL DEFAULT '',"
                " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)")));
            QVERIFY(raw.exec(QStringLiteral(
                "CREATE TABLE messages (id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL"
                " REFERENCES conversations(id) ON DELETE CASCADE, position INTEGER NOT NULL,"
                " role TEXT NOT NULL, content TEXT NOT NULL, complete INTEGER NOT NULL DEFAULT 1,"
                " token_count INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL,"
                " UNIQUE (conversation_id, position))")));
            QVERIFY(raw.exec(QStringLiteral(
                "CREATE TABLE message_traces (message_id INTEGER PRIMARY KEY REFERENCES"
                " messages(id) ON DELETE CASCADE, trace BLOB NOT NULL)")));
            QVERIFY(
                raw.exec(QStringLiteral("CREATE TABLE schema_version (version INTEGER NOT NULL)")));
            QVERIFY(raw.exec(QStringLiteral("INSERT INTO schema_version VALUES (1)")));
            QVERIFY(raw.exec(
                QStringLiteral("INSERT INTO conversations VALUES (1, 'old', '', '', 1000, 1000)")));
            QVERIFY(raw.exec(QStringLiteral(
                "INSERT INTO messages VALUES (1, 1, 0, 'user', 'old question', 1, 0, 1000)")));
        }
        ConversationStore store(path);
        const QList<Message> list = store.messages(1);
        QCOMPARE(list.size(), 1);
        QCOMPARE(list[0].content, QStringLiteral("old question"));
        QCOMPARE(list[0].finish_reason, QString());
        store.set_reply_stats(1, {QStringLiteral("eos"), 3, 10.0, 5.0});
        QCOMPARE(store.messages(1)[0].finish_reason, QStringLiteral("eos"));
        RawDb raw(QString::fromStdString(path.string()));
        QCOMPARE(raw.scalar(QStringLiteral("SELECT version FROM schema_version")).toInt(),
                 ConversationStore::kSchemaVersion);
        // Schema 3: the message reads as never regenerated.
        QCOMPARE(store.messages(1)[0].version, 0);
        QCOMPARE(store.messages(1)[0].versions, 0);
    }

    void instancesOnOtherThreads() {
        const auto path = fresh_path();
        ConversationStore main_store(path);
        const qint64 c = main_store.create_conversation(QStringLiteral("threads"), QString());
        // Each worker opens its own instance (Qt SQL connections are per thread); the writes
        // queue on SQLite's lock.
        QList<QFuture<void>> futures;
        for (int t = 0; t < 3; ++t) {
            futures.append(QtConcurrent::run([path, c, t] {
                ConversationStore store(path);
                for (int i = 0; i < 10; ++i) {
                    store.append_message(c, Role::User, QStringLiteral("t%1 m%2").arg(t).arg(i));
                }
            }));
        }
        for (auto& future : futures) future.waitForFinished();
        const QList<Message> list = main_store.messages(c);
        QCOMPARE(list.size(), 30);
        for (int i = 0; i < list.size(); ++i) QCOMPARE(list[i].position, i);
        // Using an instance from a thread that did not open it is refused, not undefined.
        // (std::thread: QFuture::result() may run a not-yet-started task on this thread.)
        QString error;
        std::thread other([&] {
            error = error_of<tokenscope::InvalidArgument>([&] { main_store.messages(c); });
        });
        other.join();
        QVERIFY2(error.contains(QStringLiteral("thread")), qPrintable(error));
    }

    // The window's store commits without waiting for the disk and a thread of its own fsyncs
    // the WAL: what it commits is visible to another connection at once (it is in the OS's
    // hands), the background fsyncs happen (the counter moves only for an fsync that found the
    // file and succeeded), also after a reply's relaxed commit.
    void backgroundSyncCommitsAndSyncs() {
        const auto path = fresh_path();
        ConversationStore store(path);
        QCOMPARE(store.background_syncs(), std::uint64_t{0});
        store.sync_in_background();
        store.sync_in_background();  // idempotent
        const qint64 c = store.create_conversation(QStringLiteral("durable"));
        store.append_message(c, Role::User, QStringLiteral("typed by the user"));
        {
            ConversationStore other(path);
            const QList<Message> seen = other.messages(c);
            QCOMPARE(seen.size(), 1);
            QCOMPARE(seen[0].content, QStringLiteral("typed by the user"));
        }
        store.wait_until_durable();
        const std::uint64_t after_first = store.background_syncs();
        QVERIFY2(after_first >= 1, "no background fsync completed");
        store.append_reply(c, QStringLiteral("an answer"), true, tokenscope::app::ReplyStats{});
        store.append_message(c, Role::User, QStringLiteral("and more"));
        store.wait_until_durable();
        QVERIFY(store.background_syncs() > after_first);
        QCOMPARE(store.messages(c).size(), 3);
    }

    // A sync of a file that is not there is not an error (SQLite may remove the WAL when its
    // last connection closes); one that cannot be opened is, and names the file.
    void syncFileDataNamesTheFile() {
        const auto dir = fresh_path().parent_path();
        std::filesystem::create_directories(dir);
        bool existed = true;
        std::string error;
        QVERIFY(tokenscope::app::sync_file_data(dir / "absent-wal", existed, error));
        QVERIFY(!existed);
        QVERIFY(error.empty());
        const auto file = dir / "present-wal";
        {
            QFile f(QString::fromStdString(file.string()));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("bytes");
        }
        QVERIFY(tokenscope::app::sync_file_data(file, existed, error));
        QVERIFY(existed);
#ifndef _WIN32
        if (::geteuid() != 0) {  // root opens anything
            QFile::setPermissions(QString::fromStdString(file.string()),
                                  QFileDevice::Permissions{});
            QVERIFY(!tokenscope::app::sync_file_data(file, existed, error));
            QVERIFY2(QString::fromStdString(error).contains(QStringLiteral("present-wal")),
                     error.c_str());
        }
#endif
    }

    // The test: kill the writer with SIGKILL mid-write, start again, everything it had
    // reported as committed is there and intact. Three rounds on the same file, so later rounds
    // also open a database left behind by a killed process.
    void sigkillLosesNothingCommitted() {
        namespace protocol = tokenscope::test::store_writer;
        const auto path = fresh_path();
        struct Round {
            qint64 conversation = 0;
            int reported = 0;
        };
        QList<Round> rounds;
        for (int run = 0; run < 3; ++run) {
            QProcess writer;
            writer.setProgram(QStringLiteral(TOKENSCOPE_STORE_WRITER));
            writer.setArguments({QString::fromStdString(path.string()), QString::number(run)});
            writer.setProcessChannelMode(QProcess::SeparateChannels);
            writer.start();
            QVERIFY2(writer.waitForStarted(10000), qPrintable(writer.errorString()));

            Round round;
            const int kill_after = 50 + 25 * run;
            QElapsedTimer timer;
            timer.start();
            while (round.reported < kill_after && timer.elapsed() < 60000) {
                if (!writer.canReadLine() && !writer.waitForReadyRead(1000)) {
                    QVERIFY2(writer.state() == QProcess::Running,
                             qPrintable("writer exited: " + writer.readAllStandardError()));
                    continue;
                }
                while (writer.canReadLine()) {
                    const QString line = QString::fromUtf8(writer.readLine()).trimmed();
                    if (line.startsWith(QLatin1String("conversation ")))
                        round.conversation = line.mid(13).toLongLong();
                    else if (line.startsWith(QLatin1String("committed ")))
                        round.reported = line.mid(10).toInt();
                }
            }
            QVERIFY2(round.reported >= kill_after,
                     qPrintable(QStringLiteral("only %1 reported").arg(round.reported)));
            writer.kill();  // SIGKILL on Unix: no destructors, no atexit, no flush
            QVERIFY(writer.waitForFinished(10000));
            QCOMPARE(writer.exitStatus(), QProcess::CrashExit);
            // Lines printed between our last read and the kill count as reported too.
            for (const QByteArray& line : writer.readAllStandardOutput().split('\n')) {
                if (line.startsWith("committed ")) round.reported = line.mid(10).toInt();
            }
            rounds.append(round);
            qInfo("round %d: killed after %d reported commits", run, round.reported);

            // Start again: every round so far is there, complete up to what was reported.
            ConversationStore store(path);
            QCOMPARE(store.conversations().size(), rounds.size());
            for (int r = 0; r < rounds.size(); ++r) {
                const QList<Message> list = store.messages(rounds[r].conversation);
                QVERIFY2(list.size() >= rounds[r].reported,
                         qPrintable(QStringLiteral("round %1: %2 of %3 reported messages")
                                        .arg(r)
                                        .arg(list.size())
                                        .arg(rounds[r].reported)));
                // At most the message in flight beyond what was reported.
                QVERIFY(list.size() <= rounds[r].reported + 1);
                for (int i = 0; i < list.size(); ++i) {
                    const Message& m = list[i];
                    QCOMPARE(m.position, i);
                    QCOMPARE(m.role, protocol::is_answer(i) ? Role::Assistant : Role::User);
                    if (i < rounds[r].reported || m.complete) {
                        QVERIFY(m.complete);
                        QCOMPARE(m.content, protocol::content(r, i));
                    } else {
                        // Killed between saving the partial answer and completing it.
                        QVERIFY(protocol::is_answer(i));
                        QCOMPARE(m.content, protocol::partial(r, i));
                    }
                }
            }
            RawDb raw(QString::fromStdString(path.string()));
            QCOMPARE(raw.scalar(QStringLiteral("PRAGMA integrity_check")).toString(),
                     QStringLiteral("ok"));
            QCOMPARE(raw.scalar(QStringLiteral("PRAGMA foreign_key_check")), QVariant());
        }
    }
};

QTEST_GUILESS_MAIN(TestConversationStore)
#include "test_conversation_store.moc"
