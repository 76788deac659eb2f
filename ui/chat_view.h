#pragma once
// The chat: a transcript of messages whose generated tokens are inspectable spans, and the
// input box underneath.
//
// Streaming: appendToken() only queues the token. A 16 ms timer (one display frame) inserts
// what was queued since the last frame in edit blocks of 32 tokens, so a fast producer costs one
// relayout per chunk instead of one per token. Each flush stops after an 8 ms budget and leaves
// the rest for the next event-loop turn, so even a burst of thousands of tokens arriving at once
// never holds the event loop for long.
//
// Tokens: hovering a token shows a tooltip with its probability and the top-10 alternatives
// before and after the sampling settings shaped the distribution; clicking it emits
// tokenClicked()/tokenSelected() for the TokenInspector. Hit-testing maps the point to the
// character under it (never the nearest gap, so the right half of a character is still that
// character) and then binary-searches the message's token start positions.
//
// Reasoning of thinking models: MessageDocument folds it under a header that is a link; a click
// on it (QTextBrowser's anchorClicked) or Enter with the text cursor on it unfolds or folds that
// message's reasoning. Toggling stops following, so that the reasoning the reader opened is not
// scrolled away by the answer still streaming below it.
//
// Following: while the reader is at the bottom of the transcript, streamed text keeps it there
// (also when the layout grows the scroll range after the insertion); scrolling up stops that
// until the reader returns to the bottom.
//
// Keyboard: Enter sends, Shift+Enter inserts a newline, Esc stops generation (or cancels an edit).
// Copy: each finished reply's note ends with a "Copy" link; right-click any message for Copy
// message. Right-click a message for Regenerate (last assistant answer) and Edit (user messages);
// Edit loads the message into the input box, and Enter then emits editRequested() instead of
// sendRequested().
#include <QPlainTextEdit>
#include <QPoint>
#include <QVector>
#include <QWidget>
#include <memory>

#include "message_document.h"
#include "panel_data.h"

class QCheckBox;
class QLabel;
class QPushButton;
class QTextBrowser;
class QTimer;
class QToolButton;
class QFrame;
class QHBoxLayout;
class QVBoxLayout;

namespace tokenscope::ui {

class ChatAttentionOverlay;
class MarkdownHighlighter;

// The message input: Enter submits, Shift+Enter inserts a newline, Esc cancels.
class ChatInput : public QPlainTextEdit {
    Q_OBJECT
  public:
    explicit ChatInput(QWidget* parent = nullptr);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

  signals:
    void submitted();
    void escapePressed();

  protected:
    void keyPressEvent(QKeyEvent* event) override;
};

class ChatView : public QWidget {
    Q_OBJECT
  public:
    explicit ChatView(QWidget* parent = nullptr);
    ~ChatView() override;

    // --- messages
    int addMessage(MessageRole role, const QString& text);
    int beginAssistantMessage();
    void finishAssistantMessage();
    void setMessages(const QVector<ChatMessage>& messages);
    void clear();
    int messageCount() const { return doc_->messageCount(); }
    const ChatMessage& message(int index) const { return doc_->message(index); }
    // Inserts queued tokens now instead of at the next frame (used before structural changes).
    void flushPendingTokens();
    int pendingTokenCount() const { return int(pending_.size()); }
    // The dimmed line under a message (an assistant reply's finish reason and speed).
    void setMessageNote(int index, const QString& note);
    // "‹ version/versions ›" in a reply's note (alternative replies).
    void setMessageVersions(int index, int version, int versions);
    // True while streamed text keeps the transcript scrolled to the bottom.
    bool isFollowing() const { return follow_; }

    // --- tokens
    // The token under a point in transcript-viewport coordinates; invalid when none.
    TokenRef tokenAt(const QPoint& viewport_pos) const;
    // The document character under a viewport point (exact: -1 off the text), for tests.
    int characterAt(const QPoint& viewport_pos) const;
    // The viewport rectangle of a token's first character; empty when it has none.
    QRect tokenRect(TokenRef ref) const;
    // The viewport rectangle of a message's reasoning fold header; empty when it has none.
    QRect thinkingHeaderRect(int message) const;
    // The viewport rectangle of a reply's "Copy" link (in its note); empty when it has none.
    QRect copyLinkRect(int message) const;
    const TokenData* tokenData(TokenRef ref) const;
    // Rich-text tooltip for a token: text, probability, logprob, top-10 before and after.
    QString tokenToolTip(TokenRef ref) const;

    bool colorByProbability() const;
    // Markdown styled in place (markdown_highlighter.h); on by default.
    bool renderMarkdown() const { return markdown_on_; }
    bool showTokenBoundaries() const;
    bool isGenerating() const { return generating_; }
    // Index of the message being edited in the input box, or -1.
    int editingMessage() const { return editing_; }
    // The banner shown while editing (what Enter will do), for tests.
    QString editBannerText() const;

    // --- attention overlay (chat_attention_overlay.h; ChatView's part in chat_view_attention.cpp)
    bool attentionOverlay() const;
    // The context position whose attention is drawn; -1 when none.
    int attentionPosition() const { return attention_position_; }
    QString attentionLegendText() const;

    // --- code blocks' Copy button (chat_view_copy.cpp): shown over the top-right corner of
    // the code block under the mouse, as chat apps do; it copies the code without its fences.
    QToolButton* codeCopyButton() const { return code_copy_; }
    // Shows the button for the code block around a document position (-1: hides it).
    void showCodeCopyAt(int doc_pos);
    // The document position of the line under a viewport point (with the text's margins and
    // the room right of a short line); -1 off the text.
    int codeLineAt(const QPoint& viewport_pos) const;

    // Access for the main window's layout and for tests.
    QTextBrowser* transcript() const { return transcript_; }
    ChatInput* input() const { return input_; }
    QPushButton* sendButton() const { return send_; }
    QPushButton* stopButton() const { return stop_; }
    QPushButton* regenerateButton() const { return regenerate_; }
    MessageDocument* messageDocument() const { return doc_; }

  public slots:
    void appendToken(const tokenscope::ui::TokenData& token);
    void setGenerating(bool generating);
    void setColorByProbability(bool on);
    void setShowTokenBoundaries(bool on);
    void setRenderMarkdown(bool on);
    // Shows the legend of the accepted-guess underline (while speculative decoding is on).
    void setSpeculationLegendVisible(bool visible);
    // Loads a user message into the input box for editing; Enter emits editRequested().
    void beginEdit(int message_index);
    void cancelEdit();
    // Unfolds a message's folded reasoning, or folds it again.
    void toggleThinking(int message_index);
    // Puts a message on the clipboard: a reply without its reasoning (MessageDocument::copyText).
    void copyMessage(int message_index);
    // The same with the markdown rendered away (Qt's markdown reader, md4c): "**bold**" as
    // "bold", list markers as the list's text, code without its fences.
    void copyMessageAsPlainText(int message_index);
    static QString markdownToPlainText(const QString& markdown);
    // "Attention on hover": hovering a token (or moving the text cursor onto it) draws its
    // attention over the earlier text, from the data setAttentionData() last gave.
    void setAttentionOverlay(bool on);
    // The Attention panel's current layer/head for this conversation's latest generation.
    void setAttentionData(const tokenscope::ui::AttentionData& data);
    void clearAttentionData();
    // Draws the overlay for the token at a document position (-1: none).
    void showAttentionAt(int doc_pos);

  signals:
    void sendRequested(const QString& text);
    void stopRequested();
    void regenerateRequested();
    void editRequested(int message_index, const QString& new_text);
    void tokenClicked(int message, int token);
    void tokenSelected(const tokenscope::ui::TokenData& token);
    // The toggles changed (from the built-in check boxes or a slot), so menus can follow.
    void colorByProbabilityChanged(bool on);
    void showTokenBoundariesChanged(bool on);
    void attentionOverlayChanged(bool on);
    void renderMarkdownChanged(bool on);
    // The "‹" / "›" of a reply's versions: show the version `step` (-1 or +1) away.
    void versionRequested(int message_index, int step);

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
    void changeEvent(QEvent* event) override;

  private:
    QRect rangeRect(int start, int end) const;
    void flush();
    void insertPending(qint64 budget_ms);
    void submit();
    void showContextMenu(const QPoint& pos);
    void updateButtons();
    bool canRegenerate() const;
    void scrollToBottom();
    void buildAttentionControls(QHBoxLayout* toggles, QVBoxLayout* layout);
    void buildCodeCopyButton();
    void placeCodeCopyButton();

    MessageDocument* doc_ = nullptr;
    QTextBrowser* transcript_ = nullptr;
    ChatInput* input_ = nullptr;
    QPushButton* send_ = nullptr;
    QPushButton* stop_ = nullptr;
    QPushButton* regenerate_ = nullptr;
    QCheckBox* color_toggle_ = nullptr;
    QCheckBox* boundary_toggle_ = nullptr;
    QLabel* speculation_legend_ = nullptr;
    QCheckBox* attention_toggle_ = nullptr;
    QLabel* attention_legend_ = nullptr;
    std::unique_ptr<ChatAttentionOverlay> overlay_;
    MarkdownHighlighter* markdown_ = nullptr;
    bool markdown_on_ = true;
    int attention_doc_pos_ = -1;
    int attention_position_ = -1;
    bool attention_dirty_ = true;
    QFrame* edit_banner_ = nullptr;
    QLabel* edit_label_ = nullptr;
    QTimer* flush_timer_ = nullptr;
    QToolButton* code_copy_ = nullptr;
    int code_copy_line_ = -1;  // first line of the code block the Copy button is for
    QVector<TokenData> pending_;
    QPoint press_pos_;
    bool generating_ = false;
    bool follow_ = true;
    int scrolling_ = 0;  // > 0 while the view itself moves the scroll bar
    int editing_ = -1;
    QString draft_before_edit_;
};

}  // namespace tokenscope::ui
