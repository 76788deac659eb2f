#pragma once
// The chat transcript as a QTextDocument plus an index from document positions to messages and
// tokens. ChatView shows the document in a QTextBrowser; everything that decides what text goes
// where (role headers, fenced code blocks, token spans and their tints) lives here so that it can
// be tested without a widget.
//
// Why a QTextDocument with char formats rather than own painting: it gives selection, copy,
// wrapping, bidi and accessibility for free. Token identity is NOT stored in the char formats
// (2,000 unique formats would bloat the format table and slow every insertion); instead each
// message remembers the document position where each of its tokens starts, and hit-testing is a
// binary search over those starts. Tints and underlines are quantised so that a whole answer
// shares a handful of formats.
//
// Fenced code blocks (```): the fence lines stay in the text, styled as part of the code block
// and dimmed. Hiding them would give the fence tokens zero-width spans, and a token-level
// inspector should be able to show that the model spent tokens on them.
#include <QColor>
#include <QObject>
#include <QPalette>
#include <QString>
#include <QTextCharFormat>
#include <QVector>
#include <span>

#include "panel_data.h"

class QTextDocument;
class QTextCursor;

namespace tokenscope::ui {

enum class MessageRole { System, User, Assistant };

// A token piece made visible: spaces as "·", newlines as "↵", tabs as "→" (a learner must see
// that " the" and "the" are different tokens). Not HTML-escaped.
QString visiblePiece(const QString& piece);
// A probability as a short percentage: "45.2%", "0.52%", "0.0012%".
QString formatProbability(double p);

struct ChatMessage {
    MessageRole role = MessageRole::User;
    QString text;
    // Generated tokens, when the message was streamed (or restored with its trace); the
    // concatenation of their texts is `text`.
    QVector<TokenData> tokens;
    // A dimmed line under the message, outside its body (how a reply ended, its speed).
    QString note;
};

// A token of the transcript: message index and token index inside that message.
struct TokenRef {
    int message = -1;
    int token = -1;
    bool valid() const { return message >= 0 && token >= 0; }
    friend bool operator==(const TokenRef&, const TokenRef&) = default;
};

class MessageDocument : public QObject {
    Q_OBJECT
  public:
    explicit MessageDocument(QObject* parent = nullptr);
    ~MessageDocument() override;

    QTextDocument* document() const { return doc_; }

    // Colours (code background, tints, header text) derive from this palette, and the code font
    // from the document's default font; call again after changing either. Restyles everything.
    void setPalette(const QPalette& palette);

    int addMessage(MessageRole role, const QString& text);
    // Starts an (empty) assistant message that appendTokens() extends; returns its index.
    int beginAssistantMessage();
    // Appends tokens to the streaming assistant message (starts one if none is open). The
    // caller batches: one call is one edit block, i.e. one relayout.
    void appendTokens(std::span<const TokenData> tokens);
    void finishAssistantMessage();
    bool isStreaming() const { return streaming_; }
    void setMessages(const QVector<ChatMessage>& messages);
    void clear();
    // Sets the line under a message; appended in place for the last message, else a rebuild.
    void setMessageNote(int index, const QString& note);

    int messageCount() const { return int(entries_.size()); }
    const ChatMessage& message(int index) const { return entries_[index].msg; }

    // The token whose text contains the character at document position `pos` (the character
    // right after cursor position `pos`); invalid when that character is not part of a token.
    TokenRef tokenAtPosition(int pos) const;
    // The message whose header or body contains position `pos`, or -1.
    int messageAtPosition(int pos) const;
    // [start, end) document positions of a token's text; {-1, -1} when out of range.
    QPair<int, int> tokenRange(TokenRef ref) const;
    // [start, end) of a message's body text.
    QPair<int, int> messageBodyRange(int message) const;

    void setColorByProbability(bool on);
    bool colorByProbability() const { return color_by_probability_; }
    void setShowTokenBoundaries(bool on);
    bool showTokenBoundaries() const { return show_boundaries_; }

    // Background tint for a token of probability p: red (unlikely) through yellow to green
    // (likely), with alpha falling to 0 as p -> 1 so that likely text stays unmarked. The tint
    // is translucent over the base colour, and text keeps the palette's text colour, which is
    // what keeps it readable on both light and dark palettes. p is quantised to 5 % steps.
    static QColor probabilityTint(float p);

    // Monospace family used for code blocks.
    static QFont codeFont(const QFont& base);

  private:
    struct Entry {
        ChatMessage msg;
        int header_start = 0;
        int body_start = 0;
        int body_end = 0;
        QVector<int> token_starts;  // document position where each token's text begins
        // Fence parser state, carried across tokens (a fence may arrive split over tokens).
        bool in_code = false;
        bool line_is_fence = false;
        QString line;  // the current line's text so far
    };

    void insertHeader(QTextCursor& cursor, Entry& entry);
    void insertNote(QTextCursor& cursor, const Entry& entry);
    // Inserts `text` at the end of the document as part of `entry`'s body; `token` is the token
    // index inside the message, or -1 for plain message text.
    void insertBodyText(QTextCursor& cursor, Entry& entry, const QString& text, int token);
    QTextCharFormat bodyFormat(const Entry& entry, bool code, int token) const;
    QTextBlockFormat blockFormat(const Entry& entry, bool code) const;
    void restyleTokens();
    void restyleAll();
    void rebuild();

    QTextDocument* doc_ = nullptr;
    QPalette palette_;
    QStringList code_families_;
    qreal code_point_size_ = 9;
    QVector<Entry> entries_;
    bool streaming_ = false;
    bool color_by_probability_ = false;
    bool show_boundaries_ = false;
};

}  // namespace tokenscope::ui
