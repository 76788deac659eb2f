#include "attention_text_map.h"

#include <QChar>
#include <QStringDecoder>
#include <algorithm>
#include <cstring>
#include <tuple>

namespace tokenscope::ui {

namespace {

// UTF-16 offsets of a UTF-8 string's byte offsets: down[b] is where the character holding byte b
// starts, up[b] where the first character starting at or after byte b starts (both for
// b = size too). A token may end inside a character (byte-level BPE splits emoji); its text
// then reaches to the end of that character, and the next token's starts at its beginning.
struct Utf16Offsets {
    QVector<int> down, up;

    explicit Utf16Offsets(const QByteArray& utf8) {
        const auto n = utf8.size();
        down.resize(n + 1);
        up.resize(n + 1);
        int u16 = 0;
        for (qsizetype b = 0; b < n;) {
            const auto lead = static_cast<unsigned char>(utf8[b]);
            const int bytes = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
            const int units = bytes == 4 ? 2 : 1;  // a supplementary character: a surrogate pair
            for (int i = 0; i < bytes && b + i < n; ++i) {
                down[b + i] = u16;
                up[b + i] = i == 0 ? u16 : u16 + units;
            }
            b += bytes;
            u16 += units;
        }
        down[n] = up[n] = u16;
    }
};

bool is_space(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// Where `message` ends the first `limit` bytes of `all` as a prefix: the longest prefix of the
// message that `all` ends with at `limit`; {-1, 0} when none does.
std::pair<qsizetype, qsizetype> prefix_at_end(const QByteArray& all, qsizetype limit,
                                              const QByteArray& message) {
    for (qsizetype at = std::max<qsizetype>(0, limit - message.size() + 1); at < limit; ++at) {
        const qsizetype length = limit - at;
        if (all[at] == message[0] &&
            std::memcmp(all.constData() + at, message.constData(), size_t(length)) == 0)
            return {at, length};
    }
    return {-1, 0};
}

}  // namespace

bool AttentionTextMap::mapReply(const QVector<QByteArray>& pieces, const Reply& reply) {
    if (reply.message < 0 || reply.message >= by_message_.size() || reply.first_position < 0 ||
        reply.first_position > pieces.size())
        return false;
    QStringDecoder utf8(QStringDecoder::Utf8, QStringDecoder::Flag::Stateless);
    const int count =
        int(std::min<qsizetype>(reply.tokens.size(), pieces.size() - reply.first_position));
    for (int i = 0; i < count; ++i) {
        const QString decoded = utf8.decode(pieces[reply.first_position + i]);
        if (utf8.hasError()) {
            utf8.resetState();
            continue;  // part of a character: the chat shows something else
        }
        // The chat's text of a token is what the engine's streaming detokenizer gave out with
        // it: text held back earlier (a possible stop string, a character's first bytes) may
        // come before its own, and a reply's first token may have lost its leading space.
        const QString& shown = reply.tokens[i];
        if (shown.isEmpty() || shown.endsWith(decoded)) continue;
        if (i == 0 && decoded.startsWith(QLatin1Char(' ')) && shown == decoded.mid(1)) continue;
        return false;
    }
    int offset = 0;
    for (int i = 0; i < count; ++i) {
        const int length = int(reply.tokens[i].size());
        if (length > 0) {
            spans_[reply.first_position + i] = {reply.message, offset, offset + length};
            by_message_[reply.message].push_back(reply.first_position + i);
        }
        offset += length;
    }
    ++matched_;
    return true;
}

AttentionTextMap::AttentionTextMap(const QVector<QByteArray>& pieces,
                                   const QVector<QString>& messages, const Reply& reply)
    : spans_(pieces.size()), by_message_(messages.size()) {
    QByteArray all;
    QVector<qsizetype> starts;  // byte offset of each position's piece in `all`, then the end
    starts.reserve(pieces.size() + 1);
    for (const QByteArray& p : pieces) {
        starts.push_back(all.size());
        all += p;
    }
    starts.push_back(all.size());

    qsizetype limit = all.size();  // each message must end before the one after it begins
    int last = int(messages.size()) - 1;
    if (mapReply(pieces, reply)) {
        limit = starts[reply.first_position];
        last = reply.message - 1;
    }
    for (int m = last; m >= 0 && limit > 0; --m) {
        const QByteArray text = messages[m].toUtf8();
        if (text.isEmpty()) continue;
        qsizetype at = -1, lead = 0, length = text.size();
        if (text.size() <= limit) at = all.lastIndexOf(text, limit - text.size());
        if (at < 0) {
            // Templates trim messages: the text without its surrounding whitespace.
            qsizetype begin = 0, end = text.size();
            while (begin < end && is_space(text[begin])) ++begin;
            while (end > begin && is_space(text[end - 1])) --end;
            if (end > begin && (begin > 0 || end < text.size()) && end - begin <= limit) {
                const QByteArray trimmed = text.mid(begin, end - begin);
                at = all.lastIndexOf(trimmed, limit - trimmed.size());
                lead = begin;
                length = trimmed.size();
            }
        }
        if (at < 0 && m == messages.size() - 1) {
            // The reply still being generated: its beginning ends the capture.
            std::tie(at, length) = prefix_at_end(all, limit, text);
            lead = 0;
        }
        if (at < 0) continue;
        ++matched_;
        const Utf16Offsets u16(text);
        // The positions whose bytes overlap [at, at + length).
        auto p = int(std::upper_bound(starts.begin(), starts.end() - 1, at) - starts.begin()) - 1;
        for (p = std::max(p, 0); p < pieces.size() && starts[p] < at + length; ++p) {
            const qsizetype from = std::max(starts[p], at),
                            to = std::min(starts[p + 1], at + length);
            if (from >= to || spans_[p].message >= 0) continue;
            spans_[p] = {m, u16.down[lead + from - at], u16.up[lead + to - at]};
            by_message_[m].push_back(p);
        }
        limit = at;
    }
}

AttentionTextMap::AttentionTextMap(const QVector<QByteArray>& pieces,
                                   const QVector<QString>& messages)
    : AttentionTextMap(pieces, messages, Reply{}) {}

AttentionTextMap AttentionTextMap::fromData(const AttentionData& data,
                                            const QVector<QString>& messages, Reply reply) {
    reply.first_position = data.prompt_tokens;
    if (!data.pieces.isEmpty()) return AttentionTextMap(data.pieces, messages, reply);
    QVector<QByteArray> pieces;
    pieces.reserve(data.labels.size());
    for (const QString& label : data.labels) pieces.push_back(label.toUtf8());
    return AttentionTextMap(pieces, messages, reply);
}

std::optional<AttentionTextMap::Span> AttentionTextMap::span(int position) const {
    if (position < 0 || position >= spans_.size() || spans_[position].message < 0) return {};
    return spans_[position];
}

int AttentionTextMap::positionAt(int message, int text_offset) const {
    if (message < 0 || message >= by_message_.size()) return -1;
    const QVector<int>& positions = by_message_[message];
    const auto it = std::upper_bound(
        positions.begin(), positions.end(), text_offset,
        [this](int offset, int position) { return offset < spans_[position].begin; });
    if (it == positions.begin()) return -1;
    const int p = *(it - 1);
    return text_offset < spans_[p].end ? p : -1;
}

}  // namespace tokenscope::ui
