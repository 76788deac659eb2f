#include "chat_view.h"

#include "chat_attention_overlay.h"
#include "markdown_highlighter.h"

#include <QAbstractTextDocumentLayout>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QCursor>
#include <QElapsedTimer>
#include <QEvent>
#include <QFrame>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QLabel>
#include <QMenu>
#include <QMouseEvent>
#include <QPushButton>
#include <QScrollBar>
#include <QStyle>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextLayout>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>
#include <QUrl>
#include <QVBoxLayout>
#include <limits>

namespace tokenscope::ui {

namespace {

// One display frame at 60 Hz: tokens arriving faster than this are inserted together.
constexpr int kFlushIntervalMs = 16;
// At most this much of a frame goes to inserting tokens; the rest is left for layout of what
// was inserted, painting and input. A burst that does not fit continues on the next turn.
constexpr qint64 kFlushBudgetMs = 8;
constexpr qsizetype kFlushChunk = 32;

QString candidateRows(const QVector<CandidateData>& list, int chosen_id, int row) {
    if (row >= list.size()) return QStringLiteral("<td></td><td></td>");
    const CandidateData& c = list[row];
    const QString piece = visiblePiece(c.piece).toHtmlEscaped();
    const QString open = c.id == chosen_id ? QStringLiteral("<b>") : QString();
    const QString close = c.id == chosen_id ? QStringLiteral("</b>") : QString();
    return QStringLiteral("<td><code>%1%2%3</code></td><td align=right>%1%4%3</td>")
        .arg(open, piece, close, formatProbability(c.probability));
}

}  // namespace

// ---------------------------------------------------------------------------------------------

ChatInput::ChatInput(QWidget* parent) : QPlainTextEdit(parent) {
    setTabChangesFocus(true);  // Tab leaves the box, so the buttons are keyboard reachable
    setPlaceholderText(tr("Message the model — Enter to send, Shift+Enter for a new line"));
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

QSize ChatInput::sizeHint() const {
    // Three lines: enough to see a short multi-line prompt without eating the transcript.
    const int h = fontMetrics().lineSpacing() * 3 + 2 * (frameWidth() + 4);
    return {QPlainTextEdit::sizeHint().width(), h};
}

QSize ChatInput::minimumSizeHint() const {
    return {120, sizeHint().height()};
}

void ChatInput::keyPressEvent(QKeyEvent* event) {
    const bool enter = event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter;
    if (enter && !(event->modifiers() & Qt::ShiftModifier)) {
        emit submitted();
        event->accept();
        return;
    }
    if (enter) {
        // Shift+Enter: a plain paragraph break (QPlainTextEdit would insert U+2028 otherwise).
        textCursor().insertText(QStringLiteral("\n"));
        event->accept();
        return;
    }
    if (event->key() == Qt::Key_Escape) {
        emit escapePressed();
        event->accept();
        return;
    }
    QPlainTextEdit::keyPressEvent(event);
}

// ---------------------------------------------------------------------------------------------

ChatView::ChatView(QWidget* parent) : QWidget(parent), doc_(new MessageDocument(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(6);

    // Toggles above the transcript.
    auto* toggles = new QHBoxLayout;
    toggles->setContentsMargins(6, 4, 6, 0);
    color_toggle_ = new QCheckBox(tr("Colour by &probability"), this);
    color_toggle_->setToolTip(
        tr("Tint each generated token by the probability it was drawn with: red = unlikely, "
           "yellow = uncertain, no tint = likely."));
    boundary_toggle_ = new QCheckBox(tr("Token &boundaries"), this);
    boundary_toggle_->setToolTip(tr("Underline tokens in alternating colours."));
    speculation_legend_ = new QLabel(this);
    speculation_legend_->setObjectName(QStringLiteral("speculationLegend"));
    // A bar of the underline's colour, then what it means.
    speculation_legend_->setText(tr("<span style=\"color:%1\"><b>▁▁▁</b></span> accepted guess")
                                     .arg(MessageDocument::acceptedGuessColor().name()));
    speculation_legend_->setToolTip(
        tr("Underlined tokens were guessed (prompt lookup or a draft model) and accepted by the "
           "model: they came out of one verification pass together with the model's own "
           "token. Click one to see the step in the Token panel."));
    speculation_legend_->setForegroundRole(QPalette::PlaceholderText);
    speculation_legend_->hide();
    toggles->addWidget(speculation_legend_);
    toggles->addStretch(1);
    toggles->addWidget(color_toggle_);
    toggles->addWidget(boundary_toggle_);
    layout->addLayout(toggles);
    buildAttentionControls(toggles, layout);
    connect(color_toggle_, &QCheckBox::toggled, this, &ChatView::setColorByProbability);
    connect(boundary_toggle_, &QCheckBox::toggled, this, &ChatView::setShowTokenBoundaries);

    transcript_ = new QTextBrowser(this);
    transcript_->setObjectName(QStringLiteral("transcript"));
    doc_->document()->setDefaultFont(font());
    doc_->setPalette(palette());
    transcript_->setDocument(doc_->document());
    markdown_ = new MarkdownHighlighter(doc_->document());
    markdown_->setPalette(palette());
    transcript_->setOpenLinks(false);
    transcript_->setPlaceholderText(tr("Start a conversation below."));
    // Links: the fold headers of reasoning sections and the replies' Copy links. Queued,
    // so that the message is laid out again after the text control's own mouse handling.
    transcript_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard |
                                         Qt::LinksAccessibleByMouse);
    connect(
        transcript_, &QTextBrowser::anchorClicked, this,
        [this](const QUrl& link) {
            const int message = MessageDocument::thinkingLinkMessage(link);
            if (message >= 0) toggleThinking(message);
            const int copy = MessageDocument::copyLinkMessage(link);
            if (copy >= 0) copyMessage(copy);
            const int copy_text = MessageDocument::copyTextLinkMessage(link);
            if (copy_text >= 0) copyMessageAsPlainText(copy_text);
            const auto [version_of, step] = MessageDocument::versionLink(link);
            if (version_of >= 0 && !generating_) emit versionRequested(version_of, step);
        },
        Qt::QueuedConnection);
    transcript_->setContextMenuPolicy(Qt::CustomContextMenu);
    transcript_->viewport()->installEventFilter(this);
    // Hover moves the attention overlay and brings up a code block's Copy button.
    transcript_->viewport()->setMouseTracking(true);
    buildCodeCopyButton();
    // Keyboard users move the overlay with the text cursor (caret browsing: F7 or a click).
    connect(transcript_, &QTextBrowser::cursorPositionChanged, this, [this] {
        if (attentionOverlay() && transcript_->hasFocus())
            showAttentionAt(transcript_->textCursor().position());
    });
    transcript_->installEventFilter(this);
    connect(transcript_, &QWidget::customContextMenuRequested, this, &ChatView::showContextMenu);
    layout->addWidget(transcript_, 1);
    // The scroll range grows when the document is laid out, which may be after the insertion
    // returned: following is applied when the range changes, not only right after inserting.
    QScrollBar* bar = transcript_->verticalScrollBar();
    connect(bar, &QScrollBar::rangeChanged, this, [this] {
        if (follow_) scrollToBottom();
    });
    connect(bar, &QScrollBar::valueChanged, this, [this, bar](int value) {
        if (scrolling_ > 0) return;
        // The reader moved it (wheel, drag, keys): follow again only from the bottom.
        follow_ = value >= bar->maximum() - 4;
    });

    // Shown while a user message is being edited in the input box.
    edit_banner_ = new QFrame(this);
    edit_banner_->setFrameShape(QFrame::StyledPanel);
    auto* banner_layout = new QHBoxLayout(edit_banner_);
    banner_layout->setContentsMargins(8, 2, 4, 2);
    edit_label_ = new QLabel(edit_banner_);
    auto* cancel = new QPushButton(tr("Cancel edit"), edit_banner_);
    cancel->setFlat(true);
    connect(cancel, &QPushButton::clicked, this, &ChatView::cancelEdit);
    banner_layout->addWidget(edit_label_, 1);
    banner_layout->addWidget(cancel);
    edit_banner_->hide();
    layout->addWidget(edit_banner_);

    auto* bottom = new QHBoxLayout;
    bottom->setContentsMargins(6, 0, 6, 6);
    input_ = new ChatInput(this);
    input_->setObjectName(QStringLiteral("chatInput"));
    bottom->addWidget(input_, 1);
    auto* buttons = new QVBoxLayout;
    buttons->setSpacing(4);
    send_ = new QPushButton(tr("&Send"), this);
    send_->setIcon(style()->standardIcon(QStyle::SP_ArrowUp));
    send_->setToolTip(tr("Send (Enter)"));
    stop_ = new QPushButton(tr("S&top"), this);
    stop_->setIcon(style()->standardIcon(QStyle::SP_MediaStop));
    stop_->setToolTip(tr("Stop generating (Esc)"));
    regenerate_ = new QPushButton(tr("&Regenerate"), this);
    regenerate_->setIcon(style()->standardIcon(QStyle::SP_BrowserReload));
    regenerate_->setToolTip(tr("Generate the last answer again"));
    buttons->addWidget(send_);
    buttons->addWidget(stop_);
    buttons->addWidget(regenerate_);
    buttons->addStretch(1);
    bottom->addLayout(buttons);
    layout->addLayout(bottom);

    connect(input_, &ChatInput::submitted, this, &ChatView::submit);
    connect(input_, &ChatInput::escapePressed, this, [this] {
        if (editing_ >= 0)
            cancelEdit();
        else
            emit stopRequested();
    });
    connect(input_, &QPlainTextEdit::textChanged, this, &ChatView::updateButtons);
    connect(send_, &QPushButton::clicked, this, &ChatView::submit);
    connect(stop_, &QPushButton::clicked, this, &ChatView::stopRequested);
    connect(regenerate_, &QPushButton::clicked, this, &ChatView::regenerateRequested);

    flush_timer_ = new QTimer(this);
    flush_timer_->setSingleShot(true);
    flush_timer_->setInterval(kFlushIntervalMs);
    flush_timer_->setTimerType(Qt::PreciseTimer);
    connect(flush_timer_, &QTimer::timeout, this, &ChatView::flush);

    setFocusProxy(input_);
    updateButtons();
}

ChatView::~ChatView() = default;

// --- messages --------------------------------------------------------------------------------

int ChatView::addMessage(MessageRole role, const QString& text) {
    flushPendingTokens();
    const int index = doc_->addMessage(role, text);
    follow_ = true;  // the reader's own message, or a new answer: show it
    scrollToBottom();
    updateButtons();
    return index;
}

int ChatView::beginAssistantMessage() {
    flushPendingTokens();
    const int index = doc_->beginAssistantMessage();
    follow_ = true;
    scrollToBottom();
    updateButtons();
    return index;
}

void ChatView::finishAssistantMessage() {
    flushPendingTokens();
    doc_->finishAssistantMessage();
    updateButtons();
}

void ChatView::setMessages(const QVector<ChatMessage>& messages) {
    // Queued tokens belong to the conversation being replaced.
    pending_.clear();
    flush_timer_->stop();
    cancelEdit();
    doc_->setMessages(messages);
    showAttentionAt(-1);
    follow_ = true;
    scrollToBottom();
    updateButtons();
}

void ChatView::setMessageVersions(int index, int version, int versions) {
    flushPendingTokens();
    doc_->setMessageVersions(index, version, versions);
}

void ChatView::setMessageNote(int index, const QString& note) {
    flushPendingTokens();
    doc_->setMessageNote(index, note);
    if (follow_) scrollToBottom();
}

void ChatView::scrollToBottom() {
    QScrollBar* bar = transcript_->verticalScrollBar();
    ++scrolling_;
    bar->setValue(bar->maximum());
    --scrolling_;
}

void ChatView::clear() {
    pending_.clear();
    flush_timer_->stop();
    cancelEdit();
    doc_->clear();
    showAttentionAt(-1);
    follow_ = true;
    updateButtons();
}

void ChatView::appendToken(const TokenData& token) {
    pending_.push_back(token);
    if (!flush_timer_->isActive()) flush_timer_->start();
}

void ChatView::flushPendingTokens() {
    flush_timer_->stop();
    insertPending(std::numeric_limits<qint64>::max());
}

void ChatView::flush() {
    insertPending(kFlushBudgetMs);
    // A backlog (a burst faster than we insert) continues right after the event loop has had
    // its turn (input, painting), not a whole frame later.
    if (!pending_.isEmpty()) flush_timer_->start(0);
}

void ChatView::insertPending(qint64 budget_ms) {
    if (pending_.isEmpty()) return;
    QElapsedTimer clock;
    clock.start();
    qsizetype done = 0;
    while (done < pending_.size()) {
        // Chunks, each one edit block (one relayout), until this frame's budget is spent.
        const qsizetype n = std::min<qsizetype>(kFlushChunk, pending_.size() - done);
        doc_->appendTokens(std::span<const TokenData>(pending_.constData() + done, n));
        done += n;
        if (clock.elapsed() >= budget_ms) break;
    }
    pending_.remove(0, done);
    // Follow the answer only if the reader has not scrolled up to read something else.
    if (follow_) scrollToBottom();
    updateButtons();
}

// --- input -----------------------------------------------------------------------------------

void ChatView::submit() {
    if (generating_) return;
    const QString text = input_->toPlainText();
    if (text.trimmed().isEmpty()) return;
    if (editing_ >= 0) {
        const int index = editing_;
        editing_ = -1;
        edit_banner_->hide();
        input_->clear();
        emit editRequested(index, text);
    } else {
        input_->clear();
        emit sendRequested(text);
    }
    updateButtons();
}

void ChatView::setGenerating(bool generating) {
    generating_ = generating;
    updateButtons();
}

bool ChatView::canRegenerate() const {
    const int n = doc_->messageCount();
    return !generating_ && n > 0 && doc_->message(n - 1).role == MessageRole::Assistant;
}

void ChatView::updateButtons() {
    send_->setEnabled(!generating_ && !input_->toPlainText().trimmed().isEmpty());
    stop_->setEnabled(generating_);
    regenerate_->setEnabled(canRegenerate());
}

void ChatView::beginEdit(int message_index) {
    if (message_index < 0 || message_index >= doc_->messageCount()) return;
    if (doc_->message(message_index).role != MessageRole::User) return;
    if (editing_ < 0) draft_before_edit_ = input_->toPlainText();
    editing_ = message_index;
    input_->setPlainText(doc_->message(message_index).text);
    input_->moveCursor(QTextCursor::End);
    const int later = doc_->messageCount() - message_index - 1;
    const QString discarded = later == 1
                                  ? tr("the message after it will be discarded")
                                  : tr("the %1 messages after it will be discarded").arg(later);
    edit_label_->setText(
        later > 0 ? tr("Editing message %1 — Enter sends it and regenerates from there; %2. "
                       "Esc cancels.")
                        .arg(message_index + 1)
                        .arg(discarded)
                  : tr("Editing message %1 — Enter sends it and regenerates from there. Esc "
                       "cancels.")
                        .arg(message_index + 1));
    edit_label_->setWordWrap(true);
    edit_banner_->show();
    input_->setFocus();
    updateButtons();
}

QString ChatView::editBannerText() const {
    return edit_banner_->isVisible() || editing_ >= 0 ? edit_label_->text() : QString();
}

void ChatView::cancelEdit() {
    if (editing_ < 0) return;
    editing_ = -1;
    edit_banner_->hide();
    input_->setPlainText(draft_before_edit_);
    draft_before_edit_.clear();
    updateButtons();
}

void ChatView::toggleThinking(int message_index) {
    // The document must hold every received token before a message is laid out again.
    flushPendingTokens();
    if (!doc_->hasThinking(message_index)) return;
    // Keep what the reader is looking at in place (the scroll value), instead of jumping to a
    // streaming answer's end; scrolling back to the bottom follows again.
    follow_ = false;
    doc_->setThinkingExpanded(message_index, !doc_->thinkingExpanded(message_index));
}

// --- tokens ----------------------------------------------------------------------------------

void ChatView::setSpeculationLegendVisible(bool visible) {
    speculation_legend_->setVisible(visible);
}

bool ChatView::colorByProbability() const {
    return doc_->colorByProbability();
}
bool ChatView::showTokenBoundaries() const {
    return doc_->showTokenBoundaries();
}

void ChatView::setColorByProbability(bool on) {
    if (color_toggle_->isChecked() != on) color_toggle_->setChecked(on);
    if (doc_->colorByProbability() == on) return;
    doc_->setColorByProbability(on);
    emit colorByProbabilityChanged(on);
}

void ChatView::setRenderMarkdown(bool on) {
    if (markdown_on_ == on) return;
    markdown_on_ = on;
    // Detached, the highlighter's formats leave the layout: the plain text as streamed.
    markdown_->setDocument(on ? doc_->document() : nullptr);
    if (on) markdown_->setPalette(palette());
    emit renderMarkdownChanged(on);
}

void ChatView::setShowTokenBoundaries(bool on) {
    if (boundary_toggle_->isChecked() != on) boundary_toggle_->setChecked(on);
    if (doc_->showTokenBoundaries() == on) return;
    doc_->setShowTokenBoundaries(on);
    emit showTokenBoundariesChanged(on);
}

int ChatView::characterAt(const QPoint& viewport_pos) const {
    const QPointF p(viewport_pos.x() + transcript_->horizontalScrollBar()->value(),
                    viewport_pos.y() + transcript_->verticalScrollBar()->value());
    QTextDocument* doc = doc_->document();
    // Fuzzy hit only finds the block; the exact character comes from that block's lines.
    const int near = doc->documentLayout()->hitTest(p, Qt::FuzzyHit);
    if (near < 0) return -1;
    const QTextBlock block = doc->findBlock(near);
    if (!block.isValid() || !block.layout()) return -1;
    const QTextLayout* layout = block.layout();
    const QPointF local = p - layout->position();
    for (int i = 0; i < layout->lineCount(); ++i) {
        const QTextLine line = layout->lineAt(i);
        if (local.y() < line.y() || local.y() >= line.y() + line.height()) continue;
        // Where the text is drawn, alignment included: a right-to-left paragraph (a reply that
        // starts with an Arabic token) is right-aligned, so [x, x + natural width) would be
        // empty space and its characters unreachable.
        const QRectF text = line.naturalTextRect();
        if (local.x() < text.left() || local.x() >= text.right()) return -1;
        int offset = line.xToCursor(local.x(), QTextLine::CursorOnCharacter);
        const int line_end = line.textStart() + line.textLength();
        if (offset >= line_end) offset = line_end - 1;
        if (offset < line.textStart()) return -1;
        return block.position() + offset;
    }
    return -1;
}

TokenRef ChatView::tokenAt(const QPoint& viewport_pos) const {
    const int pos = characterAt(viewport_pos);
    return pos < 0 ? TokenRef{} : doc_->tokenAtPosition(pos);
}

QRect ChatView::tokenRect(TokenRef ref) const {
    const auto [start, end] = doc_->tokenRange(ref);
    if (start < 0 || start >= end) return {};
    const QTextBlock block = doc_->document()->findBlock(start);
    if (!block.isValid() || !block.layout()) return {};
    const QTextLayout* layout = block.layout();
    const int offset = start - block.position();
    const QTextLine line = layout->lineForTextPosition(offset);
    if (!line.isValid()) return {};
    const qreal x0 = line.cursorToX(offset);
    const qreal x1 = line.cursorToX(offset + 1);
    const QPointF origin = layout->position();
    const QRectF r(origin.x() + std::min(x0, x1) - transcript_->horizontalScrollBar()->value(),
                   origin.y() + line.y() - transcript_->verticalScrollBar()->value(),
                   std::abs(x1 - x0), line.height());
    return r.toAlignedRect();
}

QRect ChatView::thinkingHeaderRect(int message) const {
    const auto [start, end] = doc_->thinkingHeaderRange(message);
    return rangeRect(start, end);
}

QRect ChatView::copyLinkRect(int message) const {
    const auto [start, end] = doc_->copyLinkRange(message);
    return rangeRect(start, end);
}

void ChatView::copyMessage(int message_index) {
    if (message_index < 0 || message_index >= doc_->messageCount()) return;
    flushPendingTokens();
    QGuiApplication::clipboard()->setText(doc_->copyText(message_index));
}

void ChatView::copyMessageAsPlainText(int message_index) {
    if (message_index < 0 || message_index >= doc_->messageCount()) return;
    flushPendingTokens();
    QGuiApplication::clipboard()->setText(markdownToPlainText(doc_->copyText(message_index)));
}

QString ChatView::markdownToPlainText(const QString& markdown) {
    QTextDocument parsed;
    parsed.setMarkdown(markdown, QTextDocument::MarkdownDialectGitHub);
    return parsed.toPlainText().trimmed();
}

// The viewport rectangle of document positions [start, end) on the line of `start`.
QRect ChatView::rangeRect(int start, int end) const {
    if (start < 0 || start >= end) return {};
    const QTextBlock block = doc_->document()->findBlock(start);
    if (!block.isValid() || !block.layout()) return {};
    const QTextLayout* layout = block.layout();
    const QTextLine line = layout->lineForTextPosition(start - block.position());
    if (!line.isValid()) return {};
    const qreal x0 = line.cursorToX(start - block.position());
    const qreal x1 = line.cursorToX(
        std::min(end, block.position() + line.textStart() + line.textLength()) - block.position());
    const QPointF origin = layout->position();
    const QRectF r(origin.x() + std::min(x0, x1) - transcript_->horizontalScrollBar()->value(),
                   origin.y() + line.y() - transcript_->verticalScrollBar()->value(),
                   std::abs(x1 - x0), line.height());
    return r.toAlignedRect();
}

const TokenData* ChatView::tokenData(TokenRef ref) const {
    if (ref.message < 0 || ref.message >= doc_->messageCount()) return nullptr;
    const ChatMessage& m = doc_->message(ref.message);
    if (ref.token < 0 || ref.token >= m.tokens.size()) return nullptr;
    return &m.tokens[ref.token];
}

QString ChatView::tokenToolTip(TokenRef ref) const {
    const TokenData* t = tokenData(ref);
    if (!t) return {};
    QString html = QStringLiteral(
                       "<div style='white-space:pre'><b><code>%1</code></b>"
                       "&nbsp;&nbsp;id %2</div>")
                       .arg(visiblePiece(t->text).toHtmlEscaped())
                       .arg(t->id);
    html += tr("<div>probability <b>%1</b> &nbsp; logprob %2</div>")
                .arg(formatProbability(t->probability))
                .arg(QString::number(t->logprob, 'f', 3));
    const int rows = int(std::min<qsizetype>(10, std::max(t->before.size(), t->after.size())));
    if (rows > 0) {
        html +=
            tr("<table cellspacing=0 cellpadding=2 style='margin-top:4px'>"
               "<tr><th colspan=2 align=left>before sampling settings</th>"
               "<th width=12></th><th colspan=2 align=left>after sampling settings</th></tr>");
        for (int r = 0; r < rows; ++r) {
            html += QStringLiteral("<tr>") + candidateRows(t->before, t->id, r) +
                    QStringLiteral("<td></td>") + candidateRows(t->after, t->id, r) +
                    QStringLiteral("</tr>");
        }
        html += QStringLiteral("</table>");
    }
    return html;
}

// --- events ----------------------------------------------------------------------------------

bool ChatView::eventFilter(QObject* watched, QEvent* event) {
    if (watched == transcript_->viewport()) {
        switch (event->type()) {
            case QEvent::ToolTip: {
                auto* help = static_cast<QHelpEvent*>(event);
                const TokenRef ref = tokenAt(help->pos());
                const int pos = characterAt(help->pos());
                const int fold = pos < 0 ? -1 : doc_->thinkingHeaderAt(pos);
                if (attentionOverlay() && ref.valid())
                    QToolTip::hideText();  // it would cover the text the overlay draws on
                else if (ref.valid() && tokenData(ref))
                    QToolTip::showText(help->globalPos(), tokenToolTip(ref),
                                       transcript_->viewport(), tokenRect(ref));
                else if (fold >= 0)
                    QToolTip::showText(help->globalPos(),
                                       doc_->thinkingExpanded(fold)
                                           ? tr("Hide the model's reasoning")
                                           : tr("Show the model's reasoning"),
                                       transcript_->viewport(), thinkingHeaderRect(fold));
                else
                    QToolTip::hideText();
                return true;
            }
            case QEvent::MouseMove: {
                const QPoint pos = static_cast<QMouseEvent*>(event)->position().toPoint();
                if (attentionOverlay()) showAttentionAt(characterAt(pos));
                showCodeCopyAt(codeLineAt(pos));
                break;
            }
            case QEvent::Leave:
                if (attentionOverlay()) showAttentionAt(-1);
                // Moving onto the Copy button (a child of the viewport) is not leaving.
                if (!code_copy_->geometry().contains(
                        transcript_->viewport()->mapFromGlobal(QCursor::pos())))
                    showCodeCopyAt(-1);
                break;
            case QEvent::MouseButtonPress:
                press_pos_ = static_cast<QMouseEvent*>(event)->position().toPoint();
                break;
            case QEvent::MouseButtonRelease: {
                auto* mouse = static_cast<QMouseEvent*>(event);
                const QPoint pos = mouse->position().toPoint();
                // A drag is a text selection, not a click on a token.
                if (mouse->button() == Qt::LeftButton &&
                    (pos - press_pos_).manhattanLength() < QApplication::startDragDistance()) {
                    const TokenRef ref = tokenAt(pos);
                    if (const TokenData* t = tokenData(ref)) {
                        emit tokenClicked(ref.message, ref.token);
                        emit tokenSelected(*t);
                    }
                }
                break;
            }
            default:
                break;
        }
    } else if (watched == transcript_ && event->type() == QEvent::KeyPress) {
        auto* key = static_cast<QKeyEvent*>(event);
        if (key->key() == Qt::Key_Escape) {
            emit stopRequested();
            return true;
        }
        if (key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) {
            // Keyboard users inspect the token right after the text cursor, or open the
            // reasoning whose header it is on.
            const int fold = doc_->thinkingHeaderAt(transcript_->textCursor().position());
            if (fold >= 0) {
                toggleThinking(fold);
                return true;
            }
            const TokenRef ref = doc_->tokenAtPosition(transcript_->textCursor().position());
            if (const TokenData* t = tokenData(ref)) {
                emit tokenClicked(ref.message, ref.token);
                emit tokenSelected(*t);
                return true;
            }
        }
    }
    return QWidget::eventFilter(watched, event);
}

void ChatView::changeEvent(QEvent* event) {
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::FontChange) {
        flushPendingTokens();
        doc_->document()->setDefaultFont(font());
        doc_->setPalette(palette());
        if (markdown_on_) markdown_->setPalette(palette());
        if (event->type() == QEvent::FontChange)
            attention_legend_->setFixedHeight(2 * attention_legend_->fontMetrics().lineSpacing() +
                                              2);
    }
    QWidget::changeEvent(event);
}

void ChatView::showContextMenu(const QPoint& pos) {
    QMenu* menu = transcript_->createStandardContextMenu(pos);
    menu->setAttribute(Qt::WA_DeleteOnClose);
    // The only links are fold headers: copying their internal address means nothing to a reader.
    const QString copy_link =
        QCoreApplication::translate("QWidgetTextControl", "Copy &Link Location");
    for (QAction* action : menu->actions())
        if (action->text() == copy_link) menu->removeAction(action);
    const QPointF p(pos.x() + transcript_->horizontalScrollBar()->value(),
                    pos.y() + transcript_->verticalScrollBar()->value());
    const int doc_pos = doc_->document()->documentLayout()->hitTest(p, Qt::FuzzyHit);
    const int message = doc_->messageAtPosition(doc_pos);
    if (message >= 0) {
        menu->addSeparator();
        const TokenRef ref = tokenAt(pos);
        if (const TokenData* t = tokenData(ref)) {
            const TokenData copy = *t;
            menu->addAction(tr("Inspect token"), this, [this, ref, copy] {
                emit tokenClicked(ref.message, ref.token);
                emit tokenSelected(copy);
            });
        }
        const int at = characterAt(pos);
        const int fold = at < 0 ? -1 : doc_->thinkingHeaderAt(at);
        if (fold >= 0)
            menu->addAction(
                doc_->thinkingExpanded(fold) ? tr("Hide reasoning") : tr("Show reasoning"), this,
                [this, fold] { toggleThinking(fold); });
        menu->addAction(tr("Copy message"), this, [this, message] { copyMessage(message); });
        menu->addAction(tr("Copy as plain text"), this,
                        [this, message] { copyMessageAsPlainText(message); });
        const QString code = at < 0 ? QString() : doc_->codeBlockAt(at);
        if (!code.isEmpty())
            menu->addAction(tr("Copy code block"), this,
                            [code] { QGuiApplication::clipboard()->setText(code); });
        const MessageRole role = doc_->message(message).role;
        if (role == MessageRole::User && !generating_)
            menu->addAction(tr("Edit message…"), this, [this, message] { beginEdit(message); });
        if (role == MessageRole::Assistant && message == doc_->messageCount() - 1 &&
            canRegenerate())
            menu->addAction(tr("Regenerate response"), this, &ChatView::regenerateRequested);
    }
    menu->popup(transcript_->viewport()->mapToGlobal(pos));
}

}  // namespace tokenscope::ui
