#pragma once
// Conversations out of the app and back in (File › Export / Import, issue 19).
//
// Markdown is for reading and sharing: the title, the system prompt, each message under its
// role, the reply's statistics in italics. It is not read back.
//
// JSON keeps everything the app shows: messages with their statistics and each reply's token
// trace (every token's probability and the candidates before and after the sampling settings),
// so an imported conversation is as inspectable as the original. The layout:
//   {"format": "tokenscope.conversations", "version": 1, "exported_at": ISO-8601,
//    "conversations": [{"title", "system_prompt", "model", "created_at", "updated_at",
//      "messages": [{"role", "content", "complete", "token_count", "finish_reason",
//                    "decode_tokens_per_s", "ttft_ms",
//                    "trace": [{"id", "text", "probability", "logprob", "origin",
//                               "before": [{"id", "piece", "probability", "logit"}], "after":
//                               [...]}],
//                    "version", "other_versions": [{"version", "content", ..., "trace"}]}]}]}
// (the last two only for a regenerated reply: the versions Regenerate kept).
// Import checks the whole file before writing anything, and an error names the place
// ("conversations[0].messages[3].role: 'robot' is not system, user or assistant").
#include <QByteArray>
#include <QList>
#include <QString>

#include "conversation_store.h"

namespace tokenscope::app {

QString conversation_markdown(ConversationStore& store, qint64 conversation_id);
QByteArray conversations_json(ConversationStore& store, const QList<qint64>& conversation_ids);

struct ImportResult {
    QList<qint64> conversations;  // the new ids, in the file's order
    QString error;                // empty on success (nothing was imported otherwise)
};
ImportResult import_conversations_json(ConversationStore& store, const QByteArray& json);

}  // namespace tokenscope::app
