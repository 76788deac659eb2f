#include "conversation_store.h"

#include "wal_syncer.h"

#include "util/error.h"
#include "util/paths.h"

#include <QSqlError>
#include <QSqlQuery>
#include <QThread>
#include <QVariant>
#include <QtEndian>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <system_error>

namespace tokenscope::app {

namespace {

// Each instance gets its own Qt SQL connection: connections are per thread, and a shared name
// would make a second instance silently replace the first one's connection.
QString next_connection_name() {
    static std::atomic<quint64> counter{0};
    return QStringLiteral("tokenscope-conversations-%1").arg(++counter);
}

QString sql_error_text(const QSqlError& error) {
    QString text = error.databaseText();
    if (text.isEmpty()) text = error.driverText();
    if (text.isEmpty()) text = QStringLiteral("unknown SQLite error");
    return text;
}

// A null QString binds as SQL NULL, which the NOT NULL columns reject: absent text is empty text.
QString not_null(const QString& text) {
    return text.isNull() ? QStringLiteral("") : text;
}

QDateTime from_ms(qint64 ms) {
    return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC);
}

// The columns a reply has in `messages` and each kept version in `reply_versions`, in the order
// read_reply_columns() reads them.
const QString kReplyColumns =
    QStringLiteral("content, complete, token_count, finish_reason, decode_tokens_per_s, ttft_ms");

// Reads kReplyColumns, starting at column `first`, into a Message or a ReplyVersion.
template <class Reply>
void read_reply_columns(const QSqlQuery& query, int first, Reply& out) {
    out.content = query.value(first).toString();
    out.complete = query.value(first + 1).toInt() != 0;
    out.token_count = query.value(first + 2).toInt();
    out.finish_reason = query.value(first + 3).toString();
    out.decode_tokens_per_s = query.value(first + 4).toDouble();
    out.ttft_ms = query.value(first + 5).toDouble();
}

// Schema migrations, applied in order inside one transaction each. A released version's list
// is never edited; a new schema version appends its own entry.
struct Migration {
    int version;
    QStringList statements;
};

const QList<Migration>& migrations() {
    static const QList<Migration> list = {
        {1,
         {
             QStringLiteral("CREATE TABLE conversations ("
                            " id INTEGER PRIMARY KEY,"
                            " title TEXT NOT NULL DEFAULT '',"
                            " system_prompt TEXT NOT NULL DEFAULT '',"
                            " model_path TEXT NOT NULL DEFAULT '',"
                            " created_at INTEGER NOT NULL,"  // ms since the epoch, UTC
                            " updated_at INTEGER NOT NULL)"),
             QStringLiteral("CREATE INDEX conversations_by_update ON conversations(updated_at)"),
             QStringLiteral("CREATE TABLE messages ("
                            " id INTEGER PRIMARY KEY,"
                            " conversation_id INTEGER NOT NULL"
                            "   REFERENCES conversations(id) ON DELETE CASCADE,"
                            " position INTEGER NOT NULL,"
                            " role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),"
                            " content TEXT NOT NULL,"
                            " complete INTEGER NOT NULL DEFAULT 1 CHECK (complete IN (0, 1)),"
                            " token_count INTEGER NOT NULL DEFAULT 0,"
                            " created_at INTEGER NOT NULL,"
                            // Also the index the cascade and messages() use.
                            " UNIQUE (conversation_id, position))"),
             // Traces live apart from messages so that listing a conversation does not read
             // the (much larger) BLOBs.
             QStringLiteral("CREATE TABLE message_traces ("
                            " message_id INTEGER PRIMARY KEY"
                            "   REFERENCES messages(id) ON DELETE CASCADE,"
                            " trace BLOB NOT NULL)"),
         }},
        // Each reply says how it ended and how fast it came (shown under it in the chat).
        {2,
         {
             QStringLiteral(
                 "ALTER TABLE messages ADD COLUMN finish_reason TEXT NOT NULL DEFAULT ''"),
             QStringLiteral(
                 "ALTER TABLE messages ADD COLUMN decode_tokens_per_s REAL NOT NULL DEFAULT 0"),
             QStringLiteral("ALTER TABLE messages ADD COLUMN ttft_ms REAL NOT NULL DEFAULT 0"),
         }},
        // Alternative replies (Regenerate keeps the one it replaces): the versions of an
        // assistant message not on screen, and which version the message holds (0: it has
        // never been regenerated).
        {3,
         {
             QStringLiteral("CREATE TABLE reply_versions ("
                            " id INTEGER PRIMARY KEY,"
                            " conversation_id INTEGER NOT NULL"
                            "   REFERENCES conversations(id) ON DELETE CASCADE,"
                            " position INTEGER NOT NULL,"
                            " ordinal INTEGER NOT NULL,"
                            " content TEXT NOT NULL,"
                            " complete INTEGER NOT NULL,"
                            " token_count INTEGER NOT NULL,"
                            " finish_reason TEXT NOT NULL,"
                            " decode_tokens_per_s REAL NOT NULL,"
                            " ttft_ms REAL NOT NULL,"
                            " trace BLOB,"
                            " UNIQUE (conversation_id, position, ordinal))"),
             QStringLiteral("ALTER TABLE messages ADD COLUMN version INTEGER NOT NULL DEFAULT 0"),
         }},
    };
    return list;
}

// --- token trace encoding: "TSTR", u16 version, u32 count, then per token
//   version 1: i32 id, f32 probability, f32 logprob, str text, list(before)
//   version 2: the same, then list(after)
//   version 3: the same, then u8 origin (0 plain, 1 accepted guess, 2 correction, 3 bonus token:
//              how speculative decoding produced it, so a reopened reply keeps its marking)
// list = u32 n, n x candidate; candidate = i32 id, str piece, f32 p (version 2: then f32 logit);
// str = u32 byte length + UTF-8; all little-endian. Versions 1 and 2 are still read (rows
// written by earlier builds); only version 3 is written.
constexpr char kTraceMagic[4] = {'T', 'S', 'T', 'R'};
constexpr quint16 kTraceVersion = 3;
constexpr quint8 kLastOrigin = 3;

class TraceWriter {
  public:
    template <typename T>
    void put(T value) {
        char raw[sizeof(T)];
        qToLittleEndian(value, raw);
        bytes.append(raw, sizeof(T));
    }
    void put_float(float value) {
        quint32 bits;
        std::memcpy(&bits, &value, sizeof bits);
        put(bits);
    }
    void put_string(const QString& text) {
        const QByteArray utf8 = text.toUtf8();
        put(static_cast<quint32>(utf8.size()));
        bytes.append(utf8);
    }
    QByteArray bytes;
};

class TraceReader {
  public:
    explicit TraceReader(const QByteArray& bytes) : bytes_(bytes) {}
    template <typename T>
    T get() {
        need(sizeof(T));
        const T value = qFromLittleEndian<T>(bytes_.constData() + offset_);
        offset_ += sizeof(T);
        return value;
    }
    float get_float() {
        const quint32 bits = get<quint32>();
        float value;
        std::memcpy(&value, &bits, sizeof value);
        return value;
    }
    QString get_string() {
        const quint32 size = get<quint32>();
        need(size);  // before allocating: a damaged length must not ask for gigabytes
        QString text = QString::fromUtf8(bytes_.constData() + offset_, size);
        offset_ += size;
        return text;
    }
    // A count of items each at least `min_item_bytes` long must fit in what is left.
    quint32 get_count(qsizetype min_item_bytes) {
        const quint32 count = get<quint32>();
        if (static_cast<qint64>(count) * min_item_bytes > bytes_.size() - offset_) {
            throw FormatError("token trace: count " + std::to_string(count) + " at offset " +
                              std::to_string(offset_ - 4) + " exceeds the data");
        }
        return count;
    }
    bool at_end() const { return offset_ == bytes_.size(); }
    qsizetype offset() const { return offset_; }

  private:
    void need(qsizetype n) {
        if (n > bytes_.size() - offset_) {
            throw FormatError("token trace: truncated at offset " + std::to_string(offset_) + " (" +
                              std::to_string(bytes_.size()) + " bytes)");
        }
    }
    const QByteArray& bytes_;
    qsizetype offset_ = 0;
};

}  // namespace

QString role_name(Role role) {
    switch (role) {
        case Role::System:
            return QStringLiteral("system");
        case Role::User:
            return QStringLiteral("user");
        case Role::Assistant:
            return QStringLiteral("assistant");
    }
    return {};
}

std::optional<Role> role_from_name(const QString& name) {
    if (name == QLatin1String("system")) return Role::System;
    if (name == QLatin1String("user")) return Role::User;
    if (name == QLatin1String("assistant")) return Role::Assistant;
    return std::nullopt;
}

QByteArray encode_token_trace(const QList<TraceToken>& trace) {
    TraceWriter w;
    w.bytes.append(kTraceMagic, sizeof kTraceMagic);
    w.put(kTraceVersion);
    w.put(static_cast<quint32>(trace.size()));
    for (const TraceToken& token : trace) {
        w.put(token.id);
        w.put_float(token.probability);
        w.put_float(token.logprob);
        w.put_string(token.text);
        for (const QList<TraceCandidate>* list : {&token.before, &token.after}) {
            w.put(static_cast<quint32>(list->size()));
            for (const TraceCandidate& candidate : *list) {
                w.put(candidate.id);
                w.put_string(candidate.piece);
                w.put_float(candidate.probability);
                w.put_float(candidate.logit);
            }
        }
        w.put(token.origin);
    }
    return w.bytes;
}

QList<TraceToken> decode_token_trace(const QByteArray& bytes) {
    if (bytes.size() < 6 || std::memcmp(bytes.constData(), kTraceMagic, 4) != 0) {
        throw FormatError("token trace: not a tokenscope token trace (bad magic)");
    }
    TraceReader r(bytes);
    r.get<quint32>();  // the magic, checked above
    const quint16 version = r.get<quint16>();
    if (version < 1 || version > 3) {
        throw FormatError("token trace: version " + std::to_string(version) +
                          " is not supported (this build reads 1 to 3)");
    }
    // Smallest token: id + 2 floats + empty text + candidate count(s) (+ origin) = 20 (v2: 24,
    // v3: 25) bytes; smallest candidate: 12 (v2, v3: 16) bytes.
    const qsizetype min_candidate = version == 1 ? 12 : 16;
    const quint32 count = r.get_count(version == 1 ? 20 : version == 2 ? 24 : 25);
    QList<TraceToken> trace;
    trace.reserve(count);
    for (quint32 i = 0; i < count; ++i) {
        TraceToken token;
        token.id = r.get<qint32>();
        token.probability = r.get_float();
        token.logprob = r.get_float();
        token.text = r.get_string();
        const int lists = version == 1 ? 1 : 2;
        for (int l = 0; l < lists; ++l) {
            QList<TraceCandidate>& list = l == 0 ? token.before : token.after;
            const quint32 candidates = r.get_count(min_candidate);
            list.reserve(candidates);
            for (quint32 c = 0; c < candidates; ++c) {
                TraceCandidate candidate;
                candidate.id = r.get<qint32>();
                candidate.piece = r.get_string();
                candidate.probability = r.get_float();
                if (version >= 2) candidate.logit = r.get_float();
                list.append(std::move(candidate));
            }
        }
        if (version >= 3) {
            token.origin = r.get<quint8>();
            if (token.origin > kLastOrigin) {
                throw FormatError("token trace: token " + std::to_string(i) + " has origin " +
                                  std::to_string(token.origin) + " at offset " +
                                  std::to_string(r.offset() - 1) + " (known: 0 to 3)");
            }
        }
        trace.append(std::move(token));
    }
    if (!r.at_end()) {
        throw FormatError("token trace: " + std::to_string(bytes.size() - r.offset()) +
                          " unexpected bytes after the last token");
    }
    return trace;
}

// BEGIN IMMEDIATE takes the write lock up front. A plain (deferred) BEGIN that reads first and
// writes later can fail with SQLITE_BUSY at the upgrade without the busy timeout helping, when
// another connection (a second window, another process) wrote in between.
class ConversationStore::Transaction {
  public:
    explicit Transaction(ConversationStore& store) : store_(store) {
        store_.exec(QStringLiteral("BEGIN IMMEDIATE"));
    }
    ~Transaction() {
        if (!committed_) {
            QSqlQuery rollback(store_.db_);
            rollback.exec(QStringLiteral("ROLLBACK"));
        }
    }
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

    void commit() {
        store_.exec(QStringLiteral("COMMIT"));
        committed_ = true;
        if (store_.syncer_) store_.syncer_->request();
    }

  private:
    ConversationStore& store_;
    bool committed_ = false;
};

// Commits made while one is alive do not wait for an fsync (WAL with synchronous=NORMAL): they
// survive a crash or SIGKILL of the app (the WAL is in the OS's hands at commit), and reach the
// platter with the next FULL commit, checkpoint or background sync; only a power cut in between
// can lose them.
// Used for what the model wrote (a reply can be generated again, and its token trace is only an
// explanation), never for what the user typed.
class ConversationStore::RelaxedSync {
  public:
    explicit RelaxedSync(ConversationStore& store) : store_(store) {
        store_.exec(QStringLiteral("PRAGMA synchronous=NORMAL"));
    }
    ~RelaxedSync() {
        QSqlQuery restore(store_.db_);
        restore.exec(QStringLiteral("PRAGMA synchronous=%1").arg(store_.synchronous_));
    }
    RelaxedSync(const RelaxedSync&) = delete;
    RelaxedSync& operator=(const RelaxedSync&) = delete;

  private:
    ConversationStore& store_;
};

std::filesystem::path ConversationStore::default_path() {
    return paths::data_dir() / "conversations.sqlite";
}

ConversationStore::ConversationStore(const std::filesystem::path& path)
    : path_(path), connection_name_(next_connection_name()), thread_(QThread::currentThread()) {
    try {
        open();
        migrate();
    } catch (...) {
        // The destructor does not run for a constructor that throws.
        close_connection();
        throw;
    }
}

ConversationStore::~ConversationStore() {
    syncer_.reset();  // finishes the syncs already asked for
    close_connection();
}

void ConversationStore::sync_in_background() {
    check_thread();
    if (syncer_) return;
    exec(QStringLiteral("PRAGMA synchronous=NORMAL"));
    synchronous_ = QStringLiteral("NORMAL");
    std::filesystem::path wal = path_;
    wal += "-wal";
    syncer_ = std::make_unique<WalSyncer>(std::move(wal));
}

void ConversationStore::wait_until_durable() {
    if (syncer_) syncer_->flush();
}

std::uint64_t ConversationStore::background_syncs() const {
    return syncer_ ? syncer_->syncs() : 0;
}

void ConversationStore::close_connection() noexcept {
    if (db_.isValid()) db_.close();
    // removeDatabase() warns about (and breaks) connections still referenced, so our handle
    // goes first.
    db_ = QSqlDatabase();
    if (QSqlDatabase::contains(connection_name_)) QSqlDatabase::removeDatabase(connection_name_);
}

void ConversationStore::fail(const QString& what, const QString& sql_error) const {
    std::string message = "conversation database " + path_.string() + ": " + what.toStdString();
    if (!sql_error.isEmpty()) message += ": " + sql_error.toStdString();
    throw IoError(message);
}

void ConversationStore::check_thread() const {
    if (QThread::currentThread() != thread_) {
        throw InvalidArgument("conversation database " + path_.string() +
                              ": used from a thread other than the one that opened it");
    }
}

void ConversationStore::open() {
    if (path_.has_parent_path()) {
        std::error_code ec;
        std::filesystem::create_directories(path_.parent_path(), ec);
        if (ec) {
            fail(QStringLiteral("cannot create the folder %1")
                     .arg(QString::fromStdString(path_.parent_path().string())),
                 QString::fromStdString(ec.message()));
        }
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path_, ec)) fail(QStringLiteral("is a directory"), {});

    db_ = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connection_name_);
    if (!db_.isValid()) {
        fail(QStringLiteral("the Qt SQLite driver (QSQLITE) is not available; install "
                            "libqt6sql6-sqlite"),
             {});
    }
    db_.setDatabaseName(QString::fromStdU16String(path_.u16string()));
    // Another connection holding the write lock (a second window, another process) makes us
    // wait up to 5 s instead of failing at once.
    db_.setConnectOptions(QStringLiteral("QSQLITE_BUSY_TIMEOUT=5000"));
    if (!db_.open()) fail(QStringLiteral("cannot open"), sql_error_text(db_.lastError()));

    // SQLite opens any file lazily; the first read is where a file that is not a database
    // (or has a damaged header) shows itself.
    {
        QSqlQuery probe(db_);
        if (!probe.exec(QStringLiteral("SELECT count(*) FROM sqlite_master"))) {
            fail(QStringLiteral("cannot read it as an SQLite database (is the file damaged or "
                                "not a tokenscope conversation database?)"),
                 sql_error_text(probe.lastError()));
        }
    }

    // WAL: a commit appends to the log instead of rewriting pages, readers never block the
    // writer, and a crash mid-commit leaves the database as of the last complete commit.
    QSqlQuery mode(db_);
    if (!mode.exec(QStringLiteral("PRAGMA journal_mode=WAL")) || !mode.next()) {
        fail(QStringLiteral("cannot switch to WAL"), sql_error_text(mode.lastError()));
    }
    if (mode.value(0).toString().compare(QLatin1String("wal"), Qt::CaseInsensitive) != 0) {
        // Some network file systems cannot do WAL's shared memory; the rollback journal is
        // just as safe, only slower, so this is a warning and not an error.
        qWarning("conversation database %s: journal mode is %s, not WAL", path_.string().c_str(),
                 qPrintable(mode.value(0).toString()));
    }
    mode.finish();
    // FULL, not NORMAL: in WAL mode NORMAL already survives a killed process (the commit is in
    // the OS page cache), but a power cut or kernel crash can lose the last commits. We write
    // one transaction per finished message (not per token), so an fsync per commit costs a few
    // milliseconds a message, a price worth paying for "nothing the user typed is ever lost".
    exec(QStringLiteral("PRAGMA synchronous=FULL"));
    // Off by default in SQLite, per connection: ON DELETE CASCADE needs it.
    exec(QStringLiteral("PRAGMA foreign_keys=ON"));
}

void ConversationStore::migrate() {
    Transaction transaction(*this);
    QSqlQuery version_query(db_);
    if (!version_query.exec(QStringLiteral(
            "SELECT (SELECT name FROM sqlite_master WHERE type = 'table' AND name = "
            "'schema_version'), (SELECT count(*) FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\')")) ||
        !version_query.next()) {
        fail(QStringLiteral("cannot read the schema"), sql_error_text(version_query.lastError()));
    }
    const bool has_version_table = !version_query.value(0).isNull();
    const qint64 table_count = version_query.value(1).toLongLong();
    version_query.finish();

    int version = 0;
    if (has_version_table) {
        QSqlQuery query(db_);
        if (!query.exec(QStringLiteral("SELECT max(version) FROM schema_version")) ||
            !query.next()) {
            fail(QStringLiteral("cannot read the schema version"),
                 sql_error_text(query.lastError()));
        }
        version = query.value(0).toInt();
    } else if (table_count > 0) {
        // Someone else's SQLite file: adding our tables to it would be a surprise.
        fail(QStringLiteral("is an SQLite database but not a tokenscope conversation database "
                            "(it has tables and no schema_version)"),
             {});
    } else {
        exec(QStringLiteral("CREATE TABLE schema_version (version INTEGER NOT NULL)"));
    }
    if (version > kSchemaVersion) {
        fail(QStringLiteral("schema version %1 was written by a newer tokenscope (this one "
                            "reads up to %2)")
                 .arg(version)
                 .arg(kSchemaVersion),
             {});
    }
    if (version == kSchemaVersion) return;  // nothing written: the rollback is harmless

    for (const Migration& migration : migrations()) {
        if (migration.version <= version) continue;
        for (const QString& statement : migration.statements) exec(statement);
        version = migration.version;
    }
    exec(QStringLiteral("DELETE FROM schema_version"));
    QSqlQuery set_version = prepare(QStringLiteral("INSERT INTO schema_version VALUES (?)"));
    set_version.addBindValue(version);
    run(set_version, "cannot record the schema version");
    transaction.commit();
}

void ConversationStore::exec(const QString& sql) {
    QSqlQuery query(db_);
    if (!query.exec(sql)) fail(sql, sql_error_text(query.lastError()));
}

QSqlQuery ConversationStore::prepare(const QString& sql) {
    check_thread();
    QSqlQuery query(db_);
    if (!query.prepare(sql)) {
        fail(QStringLiteral("cannot prepare \"%1\"").arg(sql), sql_error_text(query.lastError()));
    }
    return query;
}

void ConversationStore::run(QSqlQuery& query, const char* what) {
    if (!query.exec()) fail(QString::fromUtf8(what), sql_error_text(query.lastError()));
}

void ConversationStore::set_wal_autocheckpoint(int pages) {
    check_thread();
    exec(QStringLiteral("PRAGMA wal_autocheckpoint=%1").arg(std::max(0, pages)));
}

QString ConversationStore::journal_mode() {
    QSqlQuery query = prepare(QStringLiteral("PRAGMA journal_mode"));
    run(query, "cannot read the journal mode");
    return query.next() ? query.value(0).toString() : QString();
}

// The clock can repeat a millisecond (or step back); the list is ordered by updated_at, so a
// write is stamped strictly after every earlier one. Called inside the write transaction, so
// it holds across connections too.
qint64 ConversationStore::next_timestamp() {
    QSqlQuery query =
        prepare(QStringLiteral("SELECT coalesce(max(updated_at), 0) FROM conversations"));
    run(query, "cannot read the clock");
    const qint64 latest = query.next() ? query.value(0).toLongLong() : 0;
    return std::max(QDateTime::currentMSecsSinceEpoch(), latest + 1);
}

void ConversationStore::touch(qint64 conversation_id, qint64 now_ms) {
    QSqlQuery query =
        prepare(QStringLiteral("UPDATE conversations SET updated_at = ? WHERE id = ?"));
    query.addBindValue(now_ms);
    query.addBindValue(conversation_id);
    run(query, "cannot update the conversation");
    if (query.numRowsAffected() != 1) {
        throw InvalidArgument("conversation database " + path_.string() + ": no conversation " +
                              std::to_string(conversation_id));
    }
}

void ConversationStore::no_message(qint64 message_id) const {
    throw InvalidArgument("conversation database " + path_.string() + ": no message " +
                          std::to_string(message_id));
}

void ConversationStore::require_message(qint64 message_id) {
    QSqlQuery query = prepare(QStringLiteral("SELECT 1 FROM messages WHERE id = ?"));
    query.addBindValue(message_id);
    run(query, "cannot read the message");
    if (!query.next()) {
        no_message(message_id);
    }
}

qint64 ConversationStore::create_conversation(const QString& title, const QString& system_prompt,
                                              const QString& model_path) {
    check_thread();
    Transaction transaction(*this);
    const qint64 now = next_timestamp();
    QSqlQuery query = prepare(QStringLiteral(
        "INSERT INTO conversations (title, system_prompt, model_path, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?)"));
    query.addBindValue(not_null(title));
    query.addBindValue(not_null(system_prompt));
    query.addBindValue(not_null(model_path));
    query.addBindValue(now);
    query.addBindValue(now);
    run(query, "cannot create a conversation");
    const qint64 id = query.lastInsertId().toLongLong();
    query.finish();
    transaction.commit();
    return id;
}

void ConversationStore::rename(qint64 conversation_id, const QString& title) {
    check_thread();
    Transaction transaction(*this);
    touch(conversation_id, next_timestamp());
    QSqlQuery query = prepare(QStringLiteral("UPDATE conversations SET title = ? WHERE id = ?"));
    query.addBindValue(not_null(title));
    query.addBindValue(conversation_id);
    run(query, "cannot rename the conversation");
    transaction.commit();
}

void ConversationStore::set_system_prompt(qint64 conversation_id, const QString& system_prompt) {
    check_thread();
    Transaction transaction(*this);
    touch(conversation_id, next_timestamp());
    QSqlQuery query =
        prepare(QStringLiteral("UPDATE conversations SET system_prompt = ? WHERE id = ?"));
    query.addBindValue(not_null(system_prompt));
    query.addBindValue(conversation_id);
    run(query, "cannot set the system prompt");
    transaction.commit();
}

void ConversationStore::set_model_path(qint64 conversation_id, const QString& model_path) {
    check_thread();
    Transaction transaction(*this);
    touch(conversation_id, next_timestamp());
    QSqlQuery query =
        prepare(QStringLiteral("UPDATE conversations SET model_path = ? WHERE id = ?"));
    query.addBindValue(not_null(model_path));
    query.addBindValue(conversation_id);
    run(query, "cannot set the model path");
    transaction.commit();
}

void ConversationStore::delete_conversation(qint64 conversation_id) {
    check_thread();
    Transaction transaction(*this);
    QSqlQuery query = prepare(QStringLiteral("DELETE FROM conversations WHERE id = ?"));
    query.addBindValue(conversation_id);
    run(query, "cannot delete the conversation");
    if (query.numRowsAffected() != 1) {
        throw InvalidArgument("conversation database " + path_.string() + ": no conversation " +
                              std::to_string(conversation_id));
    }
    transaction.commit();
}

std::optional<Conversation> ConversationStore::conversation(qint64 conversation_id) {
    QSqlQuery query = prepare(QStringLiteral(
        "SELECT id, title, system_prompt, model_path, created_at, updated_at FROM conversations "
        "WHERE id = ?"));
    query.addBindValue(conversation_id);
    run(query, "cannot read the conversation");
    if (!query.next()) return std::nullopt;
    Conversation c;
    c.id = query.value(0).toLongLong();
    c.title = query.value(1).toString();
    c.system_prompt = query.value(2).toString();
    c.model_path = query.value(3).toString();
    c.created_at = from_ms(query.value(4).toLongLong());
    c.updated_at = from_ms(query.value(5).toLongLong());
    return c;
}

namespace {
QList<ConversationSummary> read_summaries(QSqlQuery& query) {
    QList<ConversationSummary> list;
    while (query.next()) {
        list.append({query.value(0).toLongLong(), query.value(1).toString(),
                     from_ms(query.value(2).toLongLong()), query.value(3).toString()});
    }
    return list;
}
}  // namespace

QList<ConversationSummary> ConversationStore::conversations() {
    QSqlQuery query =
        prepare(QStringLiteral("SELECT id, title, updated_at, model_path FROM conversations "
                               "ORDER BY updated_at DESC, id DESC"));
    run(query, "cannot list the conversations");
    return read_summaries(query);
}

QList<ConversationSummary> ConversationStore::search(const QString& text) {
    if (text.isEmpty()) return conversations();
    // LIKE's wildcards and our escape character itself are matched literally.
    QString escaped = text;
    escaped.replace(QLatin1Char('\\'), QLatin1String("\\\\"));
    escaped.replace(QLatin1Char('%'), QLatin1String("\\%"));
    escaped.replace(QLatin1Char('_'), QLatin1String("\\_"));
    const QString pattern = QLatin1Char('%') + escaped + QLatin1Char('%');

    QSqlQuery query = prepare(QStringLiteral(
        "SELECT c.id, c.title, c.updated_at, c.model_path FROM conversations c "
        "WHERE c.title LIKE ? ESCAPE '\\' "
        "   OR EXISTS (SELECT 1 FROM messages m "
        "              WHERE m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\') "
        "ORDER BY c.updated_at DESC, c.id DESC"));
    query.addBindValue(pattern);
    query.addBindValue(pattern);
    run(query, "cannot search the conversations");
    return read_summaries(query);
}

QList<Message> ConversationStore::messages(qint64 conversation_id) {
    QSqlQuery query = prepare(
        QStringLiteral("SELECT id, conversation_id, position, role, created_at, ") + kReplyColumns +
        QStringLiteral(", version, "
                       "(SELECT count(*) FROM reply_versions v WHERE v.conversation_id = "
                       "messages.conversation_id AND v.position = messages.position) "
                       "FROM messages WHERE conversation_id = ? ORDER BY position"));
    query.addBindValue(conversation_id);
    run(query, "cannot read the messages");
    QList<Message> list;
    while (query.next()) {
        Message m;
        m.id = query.value(0).toLongLong();
        m.conversation_id = query.value(1).toLongLong();
        m.position = query.value(2).toInt();
        // The CHECK constraint keeps other spellings out; a hand-edited file reads as user.
        m.role = role_from_name(query.value(3).toString()).value_or(Role::User);
        m.created_at = from_ms(query.value(4).toLongLong());
        read_reply_columns(query, 5, m);
        m.version = query.value(11).toInt();
        const int others = query.value(12).toInt();
        m.versions = others > 0 ? others + 1 : 0;
        list.append(std::move(m));
    }
    return list;
}

qint64 ConversationStore::append_message(qint64 conversation_id, Role role, const QString& content,
                                         bool complete, int token_count) {
    check_thread();
    Transaction transaction(*this);
    const qint64 id = insert_message(conversation_id, role, content, complete,
                                     ReplyStats{QString(), token_count, 0.0, 0.0});
    transaction.commit();
    return id;
}

qint64 ConversationStore::insert_message(qint64 conversation_id, Role role, const QString& content,
                                         bool complete, const ReplyStats& stats) {
    const qint64 now = next_timestamp();
    touch(conversation_id, now);

    QSqlQuery next = prepare(QStringLiteral(
        "SELECT coalesce(max(position) + 1, 0) FROM messages WHERE conversation_id = ?"));
    next.addBindValue(conversation_id);
    run(next, "cannot read the next position");
    const qint64 position = next.next() ? next.value(0).toLongLong() : 0;
    next.finish();

    QSqlQuery insert = prepare(QStringLiteral(
        "INSERT INTO messages (conversation_id, position, role, content, complete, token_count, "
        "created_at, finish_reason, decode_tokens_per_s, ttft_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    insert.addBindValue(conversation_id);
    insert.addBindValue(position);
    insert.addBindValue(role_name(role));
    insert.addBindValue(not_null(content));
    insert.addBindValue(complete ? 1 : 0);
    insert.addBindValue(stats.token_count);
    insert.addBindValue(now);
    insert.addBindValue(not_null(stats.finish_reason));
    insert.addBindValue(stats.decode_tokens_per_s);
    insert.addBindValue(stats.ttft_ms);
    run(insert, "cannot save the message");
    const qint64 id = insert.lastInsertId().toLongLong();
    insert.finish();
    return id;
}

void ConversationStore::update_message(qint64 message_id, const QString& content, bool complete,
                                       std::optional<int> token_count) {
    check_thread();
    Transaction transaction(*this);
    require_message(message_id);
    const qint64 now = next_timestamp();
    QSqlQuery touch_query =
        prepare(QStringLiteral("UPDATE conversations SET updated_at = ? "
                               "WHERE id = (SELECT conversation_id FROM messages WHERE id = ?)"));
    touch_query.addBindValue(now);
    touch_query.addBindValue(message_id);
    run(touch_query, "cannot update the conversation");

    QSqlQuery query = prepare(QStringLiteral(
        "UPDATE messages SET content = ?, complete = ?, token_count = coalesce(?, token_count) "
        "WHERE id = ?"));
    query.addBindValue(not_null(content));
    query.addBindValue(complete ? 1 : 0);
    query.addBindValue(token_count ? QVariant(*token_count) : QVariant(QMetaType::fromType<int>()));
    query.addBindValue(message_id);
    run(query, "cannot save the message");
    transaction.commit();
}

int ConversationStore::truncate_after(qint64 conversation_id, int position) {
    check_thread();
    Transaction transaction(*this);
    touch(conversation_id, next_timestamp());
    QSqlQuery query =
        prepare(QStringLiteral("DELETE FROM messages WHERE conversation_id = ? AND position > ?"));
    query.addBindValue(conversation_id);
    query.addBindValue(position);
    run(query, "cannot remove the later messages");
    const int removed = query.numRowsAffected();
    transaction.commit();
    return removed;
}

void ConversationStore::set_reply_stats(qint64 message_id, const ReplyStats& stats) {
    check_thread();
    Transaction transaction(*this);
    require_message(message_id);
    QSqlQuery query = prepare(QStringLiteral(
        "UPDATE messages SET finish_reason = ?, token_count = ?, decode_tokens_per_s = ?, "
        "ttft_ms = ? WHERE id = ?"));
    query.addBindValue(not_null(stats.finish_reason));
    query.addBindValue(stats.token_count);
    query.addBindValue(stats.decode_tokens_per_s);
    query.addBindValue(stats.ttft_ms);
    query.addBindValue(message_id);
    run(query, "cannot save the reply's statistics");
    transaction.commit();
}

qint64 ConversationStore::append_reply(qint64 conversation_id, const QString& content,
                                       bool complete, const ReplyStats& stats) {
    check_thread();
    RelaxedSync relaxed(*this);
    Transaction transaction(*this);
    const qint64 id = insert_message(conversation_id, Role::Assistant, content, complete, stats);
    transaction.commit();
    return id;
}

void ConversationStore::set_token_trace(qint64 message_id, const QList<TraceToken>& trace) {
    check_thread();
    const QByteArray bytes = encode_token_trace(trace);
    RelaxedSync relaxed(*this);
    Transaction transaction(*this);
    require_message(message_id);
    QSqlQuery query = prepare(
        QStringLiteral("INSERT OR REPLACE INTO message_traces (message_id, trace) VALUES (?, ?)"));
    query.addBindValue(message_id);
    query.addBindValue(bytes);
    run(query, "cannot save the token trace");
    transaction.commit();
}

// --- alternative replies ---------------------------------------------------------------------

int ConversationStore::keep_reply_version(qint64 message_id) {
    check_thread();
    Transaction transaction(*this);
    const int next = keep_reply_version_in_transaction(message_id);
    transaction.commit();
    return next;
}

ConversationStore::ReplySlot ConversationStore::reply_slot(qint64 message_id) {
    QSqlQuery m = prepare(
        QStringLiteral("SELECT conversation_id, position, version FROM messages WHERE id = ?"));
    m.addBindValue(message_id);
    run(m, "cannot read the reply");
    if (!m.next()) no_message(message_id);
    return {m.value(0).toLongLong(), m.value(1).toInt(), m.value(2).toInt()};
}

int ConversationStore::keep_reply_version_in_transaction(qint64 message_id) {
    const ReplySlot slot = reply_slot(message_id);
    QSqlQuery top = prepare(QStringLiteral(
        "SELECT coalesce(max(ordinal), 0) FROM reply_versions WHERE conversation_id = ? AND "
        "position = ?"));
    top.addBindValue(slot.conversation);
    top.addBindValue(slot.position);
    run(top, "cannot read the reply versions");
    top.next();
    const int highest = top.value(0).toInt();
    // A reply never regenerated is version 1.
    const int ordinal = slot.version > 0 ? slot.version : highest + 1;
    // Copied inside SQLite: the text and the trace BLOB never pass through this process.
    QSqlQuery insert = prepare(QStringLiteral(
        "INSERT INTO reply_versions (conversation_id, position, ordinal, content, complete, "
        "token_count, finish_reason, decode_tokens_per_s, ttft_ms, trace) "
        "SELECT conversation_id, position, ?, content, complete, token_count, finish_reason, "
        "decode_tokens_per_s, ttft_ms, "
        "(SELECT trace FROM message_traces WHERE message_id = messages.id) "
        "FROM messages WHERE id = ?"));
    insert.addBindValue(ordinal);
    insert.addBindValue(message_id);
    run(insert, "cannot keep the reply version");
    return std::max(highest, ordinal) + 1;
}

void ConversationStore::set_reply_version(qint64 message_id, int ordinal) {
    check_thread();
    Transaction transaction(*this);
    require_message(message_id);
    QSqlQuery query = prepare(QStringLiteral("UPDATE messages SET version = ? WHERE id = ?"));
    query.addBindValue(ordinal);
    query.addBindValue(message_id);
    run(query, "cannot record the reply version");
    transaction.commit();
}

void ConversationStore::select_reply_version(qint64 message_id, int ordinal) {
    check_thread();
    Transaction transaction(*this);
    const ReplySlot slot = reply_slot(message_id);
    const qint64 conversation = slot.conversation;
    const int position = slot.position;
    if (slot.version == ordinal) return;
    QSqlQuery v = prepare(QStringLiteral("SELECT id, ") + kReplyColumns +
                          QStringLiteral(", trace FROM reply_versions WHERE conversation_id = ? "
                                         "AND position = ? AND ordinal = ?"));
    v.addBindValue(conversation);
    v.addBindValue(position);
    v.addBindValue(ordinal);
    run(v, "cannot read the reply version");
    if (!v.next()) {
        throw InvalidArgument("conversation database " + path_.string() + ": message " +
                              std::to_string(message_id) + " has no version " +
                              std::to_string(ordinal));
    }
    const qint64 version_id = v.value(0).toLongLong();
    keep_reply_version_in_transaction(message_id);  // the text on screen joins the versions
    QSqlQuery update = prepare(QStringLiteral(
        "UPDATE messages SET content = ?, complete = ?, token_count = ?, finish_reason = ?, "
        "decode_tokens_per_s = ?, ttft_ms = ?, version = ? WHERE id = ?"));
    for (int column = 1; column <= 6; ++column) update.addBindValue(v.value(column));
    update.addBindValue(ordinal);
    update.addBindValue(message_id);
    run(update, "cannot show the reply version");
    QSqlQuery trace = prepare(
        v.value(7).isNull()
            ? QStringLiteral("DELETE FROM message_traces WHERE message_id = ?")
            : QStringLiteral(
                  "INSERT OR REPLACE INTO message_traces (message_id, trace) VALUES (?, ?)"));
    trace.addBindValue(message_id);
    if (!v.value(7).isNull()) trace.addBindValue(v.value(7));
    run(trace, "cannot show the reply version's token trace");
    QSqlQuery drop = prepare(QStringLiteral("DELETE FROM reply_versions WHERE id = ?"));
    drop.addBindValue(version_id);
    run(drop, "cannot update the reply versions");
    transaction.commit();
}

QList<ReplyVersion> ConversationStore::reply_versions(qint64 conversation_id, int position) {
    QSqlQuery query = prepare(QStringLiteral("SELECT ordinal, ") + kReplyColumns +
                              QStringLiteral(", trace FROM reply_versions WHERE conversation_id "
                                             "= ? AND position = ? ORDER BY ordinal"));
    query.addBindValue(conversation_id);
    query.addBindValue(position);
    run(query, "cannot read the reply versions");
    QList<ReplyVersion> list;
    while (query.next()) {
        ReplyVersion v;
        v.ordinal = query.value(0).toInt();
        read_reply_columns(query, 1, v);
        if (!query.value(7).isNull()) v.trace = decode_token_trace(query.value(7).toByteArray());
        list.append(std::move(v));
    }
    return list;
}

void ConversationStore::add_reply_version(qint64 conversation_id, int position,
                                          const ReplyVersion& version) {
    check_thread();
    Transaction transaction(*this);
    QSqlQuery insert = prepare(QStringLiteral(
        "INSERT INTO reply_versions (conversation_id, position, ordinal, content, complete, "
        "token_count, finish_reason, decode_tokens_per_s, ttft_ms, trace) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    insert.addBindValue(conversation_id);
    insert.addBindValue(position);
    insert.addBindValue(version.ordinal);
    insert.addBindValue(not_null(version.content));
    insert.addBindValue(version.complete ? 1 : 0);
    insert.addBindValue(version.token_count);
    insert.addBindValue(not_null(version.finish_reason));
    insert.addBindValue(version.decode_tokens_per_s);
    insert.addBindValue(version.ttft_ms);
    insert.addBindValue(version.trace.isEmpty() ? QVariant(QMetaType(QMetaType::QByteArray))
                                                : QVariant(encode_token_trace(version.trace)));
    run(insert, "cannot add the reply version");
    transaction.commit();
}

void ConversationStore::drop_reply_versions_after(qint64 conversation_id, int position) {
    check_thread();
    Transaction transaction(*this);
    QSqlQuery query = prepare(
        QStringLiteral("DELETE FROM reply_versions WHERE conversation_id = ? AND position > ?"));
    query.addBindValue(conversation_id);
    query.addBindValue(position);
    run(query, "cannot remove the later reply versions");
    transaction.commit();
}

QList<TraceToken> ConversationStore::token_trace(qint64 message_id) {
    QSqlQuery query =
        prepare(QStringLiteral("SELECT trace FROM message_traces WHERE message_id = ?"));
    query.addBindValue(message_id);
    run(query, "cannot read the token trace");
    if (!query.next()) return {};
    return decode_token_trace(query.value(0).toByteArray());
}

}  // namespace tokenscope::app
