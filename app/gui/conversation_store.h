#pragma once
// ConversationStore: conversations and their messages in one SQLite database (Qt SQL, WAL).
//
// Durability contract: every write is its own transaction and is committed (and, with
// synchronous=FULL, fsynced) before the call returns. A store on the GUI thread calls
// sync_in_background(): its commits return once SQLite has handed them to the OS (safe against
// a crash or SIGKILL) and a WalSyncer fsyncs them a few milliseconds later on its own thread, so
// a busy disk never stalls the window (see wal_syncer.h). Two writes of what the model produced,
// append_reply() and set_token_trace(), commit without waiting for the fsync (synchronous=
// NORMAL for that transaction): they survive a crash or SIGKILL and are on disk with the next
// FULL commit; a power cut right after could lose them. That keeps a long reply's save from
// stalling the GUI thread (an fsync here takes 25-45 ms) and never touches what the user typed.
// The GUI commits the user's message as soon as it is sent, the assistant's answer when it
// completes, and the partial answer when Stop is pressed (complete = false), so a crash or SIGKILL
// loses at most the tokens streamed since the last commit, never anything the user typed.
//
// Threading: Qt SQL connections belong to the thread that opened them, so an instance must be
// used on the thread that constructed it. Several instances (on several threads, or in several
// processes) may open the same file; each gets its own connection and SQLite serialises the
// writers (busy timeout 5 s).
//
// Errors: tokenscope::IoError naming the database path and SQLite's own message (a file that
// is not a database, a schema from a newer tokenscope, a full disk); tokenscope::InvalidArgument
// for an id that does not exist.
#include <QByteArray>
#include <QDateTime>
#include <QList>
#include <QSqlDatabase>
#include <QString>

#include <filesystem>
#include <memory>
#include <optional>

class QSqlQuery;
class QThread;

namespace tokenscope::app {

class WalSyncer;

enum class Role { System, User, Assistant };

// "system", "user", "assistant": the spelling stored in the database (and in chat templates).
QString role_name(Role role);
std::optional<Role> role_from_name(const QString& name);

struct ConversationSummary {
    qint64 id = 0;
    QString title;
    QDateTime updated_at;  // UTC
    QString model_path;    // what answered it last (a file, or "MODEL on URL"); may be empty
};

struct Conversation {
    qint64 id = 0;
    QString title;
    QString system_prompt;
    QString model_path;  // the model the conversation last ran with; empty when unknown
    QDateTime created_at;
    QDateTime updated_at;
};

struct Message {
    qint64 id = 0;
    qint64 conversation_id = 0;
    int position = 0;  // 0, 1, 2, ... within the conversation, without gaps
    Role role = Role::User;
    QString content;
    bool complete = true;  // false: an answer cut short by Stop (or a crash mid-generation)
    int token_count = 0;
    QDateTime created_at;
    // How an assistant reply ended and how fast it came (schema 2; empty/0 for older rows and
    // for user messages): the engine's finish_reason_name() ("eos", "stop_token", "stop_string",
    // "max_tokens", "cancelled", "context_full") or "error".
    QString finish_reason;
    double decode_tokens_per_s = 0.0;
    double ttft_ms = 0.0;
    // Alternative replies (schema 3): which version of the reply at this position the message
    // holds (1-based) and how many there are; both 0 for a reply never regenerated.
    int version = 0;
    int versions = 0;

    friend bool operator==(const Message&, const Message&) = default;
};

// What set_reply_stats() records about a finished assistant reply.
struct ReplyStats {
    QString finish_reason;
    int token_count = 0;
    double decode_tokens_per_s = 0.0;
    double ttft_ms = 0.0;
};

// One generated token as the token view shows it, so a reopened conversation can show it again
// without the model loaded: the text delta it added and the alternatives it beat.
struct TraceCandidate {
    qint32 id = 0;
    QString piece;
    float probability = 0.0f;
    float logit = 0.0f;  // the raw logit (version 1 traces did not store it: 0)

    friend bool operator==(const TraceCandidate&, const TraceCandidate&) = default;
};

struct TraceToken {
    qint32 id = 0;
    QString text;
    float probability = 0.0f;
    float logprob = 0.0f;
    // The top candidates before sampling settings (softmax of the raw logits) and after them
    // (what the token was drawn from). A version 1 trace has only `before`.
    QList<TraceCandidate> before;
    QList<TraceCandidate> after;
    // How speculative decoding produced the token (ui::TokenOrigin's value; 0: a plain decode
    // step). Version 3; older traces read as 0.
    quint8 origin = 0;

    friend bool operator==(const TraceToken&, const TraceToken&) = default;
};

// A version of an assistant reply that is not the one its message shows (alternative
// replies): what keep_reply_version() kept.
struct ReplyVersion {
    int ordinal = 0;  // 1-based, the "2" of "2/3"
    QString content;
    bool complete = true;
    int token_count = 0;
    QString finish_reason;
    double decode_tokens_per_s = 0.0;
    double ttft_ms = 0.0;
    QList<TraceToken> trace;
};

// A reply's own fields, shared by a Message and a ReplyVersion (not which version it is, not
// its trace), copied from one form to the other.
template <class From, class To>
void copy_reply_fields(const From& from, To& to) {
    to.content = from.content;
    to.complete = from.complete;
    to.token_count = from.token_count;
    to.finish_reason = from.finish_reason;
    to.decode_tokens_per_s = from.decode_tokens_per_s;
    to.ttft_ms = from.ttft_ms;
}

// Versioned, little-endian BLOB encoding of a trace. decode throws tokenscope::FormatError on
// bytes it did not write (a damaged row must not take the window down).
QByteArray encode_token_trace(const QList<TraceToken>& trace);
QList<TraceToken> decode_token_trace(const QByteArray& bytes);

class ConversationStore {
  public:
    static constexpr int kSchemaVersion = 3;

    // tokenscope::paths::data_dir() / "conversations.sqlite".
    static std::filesystem::path default_path();

    // Opens or creates the database (and its parent directories), switches it to WAL and
    // migrates the schema to kSchemaVersion. Throws IoError when the file is not a usable
    // SQLite database or was written by a newer schema.
    explicit ConversationStore(const std::filesystem::path& path = default_path());
    ~ConversationStore();
    ConversationStore(const ConversationStore&) = delete;
    ConversationStore& operator=(const ConversationStore&) = delete;

    const std::filesystem::path& path() const { return path_; }
    // What SQLite reports for PRAGMA journal_mode ("wal" unless the file system refused it).
    QString journal_mode();
    // This connection's automatic WAL checkpoint threshold in pages (SQLite's default: 1000;
    // 0: never, another connection does them).
    void set_wal_autocheckpoint(int pages);
    // From now on commits do not wait for the disk (synchronous=NORMAL) and a thread of the
    // store's own fsyncs the WAL after each one. For the GUI thread's store. Idempotent.
    void sync_in_background();
    // Waits until every commit made so far has been fsynced (no-op without
    // sync_in_background()). The destructor calls it.
    void wait_until_durable();
    // Completed background fsyncs (0 without sync_in_background()). For tests.
    std::uint64_t background_syncs() const;

    // --- conversations ---
    qint64 create_conversation(const QString& title, const QString& system_prompt = {},
                               const QString& model_path = {});
    void rename(qint64 conversation_id, const QString& title);
    void set_system_prompt(qint64 conversation_id, const QString& system_prompt);
    void set_model_path(qint64 conversation_id, const QString& model_path);
    // Removes the conversation with its messages and traces (ON DELETE CASCADE).
    void delete_conversation(qint64 conversation_id);
    std::optional<Conversation> conversation(qint64 conversation_id);
    // Most recently updated first.
    QList<ConversationSummary> conversations();
    // Conversations whose title or any message contains `text` literally (% and _ are not
    // wildcards; case-insensitive for ASCII as SQLite's LIKE is). Empty text: all of them.
    QList<ConversationSummary> search(const QString& text);

    // --- messages ---
    // In position order.
    QList<Message> messages(qint64 conversation_id);
    // Appends at the next position and returns the new message's id.
    qint64 append_message(qint64 conversation_id, Role role, const QString& content,
                          bool complete = true, int token_count = 0);
    // For the streaming answer: its final text when it completes, or what there was on Stop.
    // token_count is left as it is when not given.
    void update_message(qint64 message_id, const QString& content, bool complete,
                        std::optional<int> token_count = std::nullopt);
    // Drops every message after `position` (editing an earlier user message replaces what
    // followed). Returns how many were removed.
    int truncate_after(qint64 conversation_id, int position);
    // Finish reason, token count and speed of an assistant reply.
    void set_reply_stats(qint64 message_id, const ReplyStats& stats);
    // A finished assistant reply with its statistics in one transaction (the GUI thread calls
    // it when a reply ends; it does not wait for an fsync). Returns the new message's id.
    qint64 append_reply(qint64 conversation_id, const QString& content, bool complete,
                        const ReplyStats& stats);

    // --- alternative replies (conversation_store_versions.cpp) ---
    // Keeps an assistant message (text, statistics, token trace) among the versions of its
    // position before Regenerate replaces it. Returns the ordinal the next reply there takes.
    int keep_reply_version(qint64 message_id);
    // Marks the message as holding version `ordinal` of its position.
    void set_reply_version(qint64 message_id, int ordinal);
    // Shows version `ordinal` in the message's place; the message's present text goes back
    // among the versions. No-op for the version it already holds.
    void select_reply_version(qint64 message_id, int ordinal);
    // Editing an earlier message: the versions of the later positions go with them.
    void drop_reply_versions_after(qint64 conversation_id, int position);
    // The versions kept at a position (not the one on show), by ordinal.
    QList<ReplyVersion> reply_versions(qint64 conversation_id, int position);
    // Import: a version as it was exported.
    void add_reply_version(qint64 conversation_id, int position, const ReplyVersion& version);

    // --- token traces (optional, one per assistant message) ---
    void set_token_trace(qint64 message_id, const QList<TraceToken>& trace);
    // Empty when none was stored.
    QList<TraceToken> token_trace(qint64 message_id);

  private:
    class Transaction;
    class RelaxedSync;

    void open();
    void migrate();
    void close_connection() noexcept;
    qint64 next_timestamp();
    void exec(const QString& sql);
    QSqlQuery prepare(const QString& sql);
    void run(QSqlQuery& query, const char* what);
    void check_thread() const;
    void touch(qint64 conversation_id, qint64 now_ms);
    // The row at the next position, inside the caller's transaction; returns its id.
    qint64 insert_message(qint64 conversation_id, Role role, const QString& content, bool complete,
                          const ReplyStats& stats);
    void require_message(qint64 message_id);
    // Where a reply sits and which version it holds (throws for an unknown message).
    struct ReplySlot {
        qint64 conversation = 0;
        int position = 0;
        int version = 0;
    };
    ReplySlot reply_slot(qint64 message_id);
    int keep_reply_version_in_transaction(qint64 message_id);
    [[noreturn]] void no_message(qint64 message_id) const;
    [[noreturn]] void fail(const QString& what, const QString& sql_error) const;

    std::filesystem::path path_;
    QString connection_name_;
    QSqlDatabase db_;
    QThread* thread_ = nullptr;
    // "FULL", or "NORMAL" once commits are synced in the background; what RelaxedSync restores.
    QString synchronous_ = QStringLiteral("FULL");
    std::unique_ptr<WalSyncer> syncer_;
};

}  // namespace tokenscope::app
