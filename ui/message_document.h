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
//
// Thinking models: the reasoning at the start of a reply (<think>…</think>, found by
// ThinkSplitter) is a section folded under a header line, "▸ Thinking… (12 tokens)" while it
// streams and "▸ Thought for 40 tokens" once closed; the header is a link (ChatView toggles the
// section on a click). Unlike code fences, the tags and the whitespace around them are not
// shown: they are markup, and the header already says how many tokens the reasoning took. The
// message text keeps everything; only the document leaves text out. A token with no shown text
// (a tag, folded reasoning) has no text in its range: it starts where the next shown text goes
// (folded reasoning: at the end of the header), and at most holds the line break put before the
// reasoning or the answer. The header belongs to no token, so a click on it never inspects one.
// Unfolding lays out that one message again and moves the positions of the messages after it.
#include <QColor>
#include <QObject>
#include <QPalette>
#include <QString>
#include <QTextCharFormat>
#include <QVector>
#include <span>

#include "panel_data.h"
#include "think_section.h"

class QTextDocument;
class QTextCursor;
class QUrl;

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
    // Alternative replies: this is version `version` of `versions` (0 of 0: the only one); the
    // note then starts with "‹ 2/3 ›", the arrows links to the neighbouring versions.
    int version = 0;
    int versions = 0;
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
    // [start, end) document positions of a token's text; {-1, -1} when out of range, and for
    // the last tokens of a streaming reply while their text may still be a "</think>".
    QPair<int, int> tokenRange(TokenRef ref) const;
    // [start, end) of a message's body text.
    QPair<int, int> messageBodyRange(int message) const;

    // --- code blocks (``` fences): each of their blocks carries kCodeBlockProperty
    static constexpr int kCodeBlockProperty = QTextFormat::UserProperty + 1;
    // The code of the block around document position `pos` without its fence lines; empty
    // when `pos` is not in a code block.
    QString codeBlockAt(int pos) const;
    // The document positions of the first and the last line of the code block around `pos`
    // (fence lines included); {-1, -1} when `pos` is not in a code block.
    QPair<int, int> codeBlockLines(int pos) const;

    // --- the message text behind the document (overlays that address a message's text)
    // The document ranges that show [begin, end) of message(message).text (UTF-16 offsets);
    // text that is not shown (folded reasoning, think tags) has none. Adjacent ranges merged.
    QVector<QPair<int, int>> textRanges(int message, int begin, int end) const;
    // The offset in its message's text of the character at document position `pos`, with the
    // message in *message; -1 when the character is not message text (headers, notes).
    int textOffsetAt(int pos, int* message) const;

    // --- reasoning of thinking models (see above); assistant messages only
    // The message shows a fold header (it has non-empty reasoning).
    bool hasThinking(int message) const;
    bool thinkingExpanded(int message) const;
    // Unfolds or folds a message's reasoning (folded by default); lays out only that message.
    void setThinkingExpanded(int message, bool expanded);
    // [start, end) of the fold header's text; {-1, -1} when the message has none.
    QPair<int, int> thinkingHeaderRange(int message) const;
    // The message whose fold header contains position `pos` (its end included), or -1.
    int thinkingHeaderAt(int pos) const;
    // The message a fold header's link stands for; -1 for any other link.
    static int thinkingLinkMessage(const QUrl& link);
    // Replies with a note end it with a "Copy" link; the message it copies, -1 for other links.
    static int copyLinkMessage(const QUrl& link);
    // The message a reply's "Copy as text" link (markdown rendered away) is for; -1 for others.
    static int copyTextLinkMessage(const QUrl& link);
    // A "‹" / "›" link of the alternative replies: {message, -1 or +1}; {-1, 0} for other links.
    static QPair<int, int> versionLink(const QUrl& link);
    // [start, end) of the "‹" (step -1) or "›" (+1) link of a message; {-1, -1} when none.
    QPair<int, int> versionLinkRange(int message, int step) const;
    void setMessageVersions(int index, int version, int versions);
    // [start, end) of a message's "Copy" link; {-1, -1} when it has none.
    QPair<int, int> copyLinkRange(int message) const;
    QPair<int, int> copyTextLinkRange(int message) const;
    // What "Copy" puts on the clipboard: a reply's answer without its reasoning and the think
    // tags (as the model wrote it, markdown included); other messages' text as it is.
    QString copyText(int message) const;

    void setColorByProbability(bool on);
    bool colorByProbability() const { return color_by_probability_; }
    void setShowTokenBoundaries(bool on);
    bool showTokenBoundaries() const { return show_boundaries_; }

    // Background tint for a token of probability p: red (unlikely) through yellow to green
    // (likely), with alpha falling to 0 as p -> 1 so that likely text stays unmarked. The tint
    // is translucent over the base colour, and text keeps the palette's text colour, which is
    // what keeps it readable on both light and dark palettes. p is quantised to 5 % steps.
    static QColor probabilityTint(float p);
    // Underline colour of tokens that were an accepted speculative guess (TokenOrigin::Accepted);
    // the chat view's legend uses it too. Token boundaries, when shown, take the underline.
    static QColor acceptedGuessColor();

    // Monospace family used for code blocks.
    static QFont codeFont(const QFont& base);

  private:
    struct Entry {
        ChatMessage msg;
        int header_start = 0;
        int body_start = 0;
        int body_end = 0;
        // Document position where each token's text begins. Recorded when the token's first
        // shown character is inserted, so a token whose text is still held back (a possible
        // tag) or hidden has none yet; all have one once the reply is complete.
        QVector<int> token_starts;
        QVector<int> token_offsets;  // offset in msg.text where each token begins
        // Fence parser state, carried across tokens (a fence may arrive split over tokens).
        bool in_code = false;
        bool line_is_fence = false;
        QString line;  // the current line's text so far
        // Thinking section: where it lies in the text, how much of the text has been laid out
        // (shown or hidden), and the fold header.
        ThinkSplitter think;
        int laid_out = 0;
        bool think_expanded = false;
        bool thinking_shown = false;  // reasoning text is in the document (unfolded)
        bool answer_begun = false;
        int fold_start = -1;  // document range of the fold header's text; -1: none
        int fold_end = -1;
        QString fold_label;
    };

    static Entry makeEntry(const ChatMessage& message);
    // [start, end) of the link to `href`; {-1, -1} when the document has none.
    QPair<int, int> anchorRange(const QString& href) const;
    int appendEntry(MessageRole role, const QString& text, bool complete);
    // Header, body and note of a message at the cursor (used for the whole document).
    void renderEntry(QTextCursor& cursor, int index, bool complete);
    void insertHeader(QTextCursor& cursor, Entry& entry);
    void insertNote(QTextCursor& cursor, int index);
    // Lays out the text the splitter has decided since the last call, at the cursor.
    void insertDecided(QTextCursor& cursor, int index);
    // Lays out what the last advance() of the splitter decided, at the end of the body.
    void renderMore(int index);
    // Lays out a message's body again in place (fold toggled, or found to be reasoning).
    void rerenderBody(int index);
    void insertFoldHeader(QTextCursor& cursor, int index);
    // Updates the fold header's text (token count, streaming/closed, arrow) in place.
    void refreshFoldHeader(int index);
    QString foldLabel(const Entry& entry) const;
    // Moves the document positions of the messages after `index` by `delta`.
    void shiftEntriesAfter(int index, int delta);
    // Inserts `text` at the cursor as part of `entry`'s body; `token` is the token index inside
    // the message, or -1 for plain message text.
    void insertBodyText(QTextCursor& cursor, Entry& entry, const QString& text, int token);
    void insertThinkingText(QTextCursor& cursor, Entry& entry, const QString& text, int token);
    QTextCharFormat bodyFormat(const Entry& entry, bool code, int token) const;
    QTextBlockFormat blockFormat(const Entry& entry, bool code) const;
    QTextCharFormat thinkingFormat(const Entry& entry, int token) const;
    QTextBlockFormat thinkingBlockFormat() const;
    QTextCharFormat foldFormat(int index) const;
    void setTokenUnderline(QTextCharFormat& f, const TokenData& t, int token) const;
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
