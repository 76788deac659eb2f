#pragma once
// Which chat text each position of an attention capture stands for, so that a token's attention
// can be drawn on the transcript itself (issue 18's text overlay).
//
// The capture covers the model's whole context: the prompt as the chat template rendered it
// (markers, system prompt, earlier turns re-tokenized) and then the reply's tokens. The chat
// shows only the messages' text. So the positions are matched to the messages by text: the
// bytes of the positions' tokens are concatenated, and each message's UTF-8 text is searched
// for in that string from the end backwards (the latest message first, each one before the
// one after it), which finds the occurrence the template put there even when a short message
// ("hi") also occurs earlier, in the system prompt say. Templates may trim a message, so a
// message not found whole is searched for without its surrounding whitespace. The reply being
// generated is at the end and may be only partly in the capture (its last token has not been
// through the model yet), so the last message may also match as a prefix that ends the string.
//
// Positions that match no message text (template markers, BOS, the system prompt) have no
// span: the overlay reports the share of attention that goes to them instead of drawing it.
#include <QByteArray>
#include <QString>
#include <QVector>
#include <optional>

#include "panel_data.h"

namespace tokenscope::ui {

class AttentionTextMap {
  public:
    // A piece of a message's text: [begin, end) in UTF-16 offsets of the message's text.
    struct Span {
        int message = -1;
        int begin = 0;
        int end = 0;
        friend bool operator==(const Span&, const Span&) = default;
    };

    // The reply the capture generated, as the chat holds it: its message and its tokens' texts
    // (concatenated, the message's text), generated at positions first_position, +1, ...
    struct Reply {
        int message = -1;
        int first_position = -1;
        QVector<QString> tokens;
    };

    AttentionTextMap() = default;
    // pieces: each position's bytes (AttentionData::pieces, or the labels' UTF-8 when those are
    // empty); messages: the chat's message texts in order. With a reply, its tokens map to
    // their positions one to one (no text search: a token that is part of a character shows as
    // U+FFFD in the chat, so the reply's text need not equal its bytes), provided every token
    // whose bytes are whole UTF-8 reads the same in the chat; the messages before it are then
    // searched for in the prompt only.
    AttentionTextMap(const QVector<QByteArray>& pieces, const QVector<QString>& messages,
                     const Reply& reply);
    AttentionTextMap(const QVector<QByteArray>& pieces, const QVector<QString>& messages);
    // `reply`'s first_position is taken from data.prompt_tokens.
    static AttentionTextMap fromData(const AttentionData& data, const QVector<QString>& messages,
                                     Reply reply);

    int positionCount() const { return int(spans_.size()); }
    // The text a position's token stands for; none for template markers and the like.
    std::optional<Span> span(int position) const;
    // The position whose token covers `text_offset` of a message's text; -1 when none does.
    int positionAt(int message, int text_offset) const;
    // How many messages were found among the positions (for the legend and tests).
    int matchedMessages() const { return matched_; }

  private:
    // Maps the reply's tokens to their positions; false (nothing mapped) when they disagree.
    bool mapReply(const QVector<QByteArray>& pieces, const Reply& reply);

    QVector<Span> spans_;  // per position; message -1: no chat text
    // Per message: the positions that cover its text, in text order (begin offsets rising).
    QVector<QVector<int>> by_message_;
    int matched_ = 0;
};

}  // namespace tokenscope::ui
