// ChatView's Copy button for code blocks: one QToolButton on the transcript's viewport, moved to
// the top-right corner of whichever code block the mouse is over. A widget rather than text in
// the document, because everything in a message's body is the model's own text (token
// positions, copy, the attention overlay address it).
#include <QAbstractTextDocumentLayout>
#include <QClipboard>
#include <QGuiApplication>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTimer>
#include <QToolButton>
#include <algorithm>

#include "chat_view.h"
#include "message_document.h"

namespace tokenscope::ui {

namespace {
constexpr int kCopiedNoticeMs = 1500;
constexpr int kInset = 4;  // px between the button and the code block's edges
}  // namespace

void ChatView::buildCodeCopyButton() {
    code_copy_ = new QToolButton(transcript_->viewport());
    code_copy_->setObjectName(QStringLiteral("codeCopyButton"));
    code_copy_->setText(tr("Copy"));
    code_copy_->setToolTip(tr("Copy this code block (without its ``` lines)"));
    code_copy_->setCursor(Qt::PointingHandCursor);
    code_copy_->setFocusPolicy(Qt::NoFocus);  // the keyboard has the context menu's entry
    code_copy_->hide();
    connect(code_copy_, &QToolButton::clicked, this, [this] {
        if (code_copy_line_ < 0) return;
        flushPendingTokens();
        QGuiApplication::clipboard()->setText(doc_->codeBlockAt(code_copy_line_));
        code_copy_->setText(tr("Copied"));
        placeCodeCopyButton();  // the wider label keeps to the corner
        QTimer::singleShot(kCopiedNoticeMs, code_copy_, [this] {
            code_copy_->setText(tr("Copy"));
            placeCodeCopyButton();
        });
    });
    // Scrolling moves the block under the button; an edit before it moves the block itself.
    connect(transcript_->verticalScrollBar(), &QScrollBar::valueChanged, this,
            &ChatView::placeCodeCopyButton);
    connect(doc_->document(), &QTextDocument::contentsChange, this,
            [this](int from, int removed, int) {
                if (removed > 0 && from <= code_copy_line_) showCodeCopyAt(-1);
            });
}

int ChatView::codeLineAt(const QPoint& viewport_pos) const {
    const QPoint content = viewport_pos + QPoint(transcript_->horizontalScrollBar()->value(),
                                                 transcript_->verticalScrollBar()->value());
    // cursorForPosition finds the nearest position, also right of a short line or in a block's
    // margin; the block's own rectangle then says whether the point is really on it.
    const QTextBlock block =
        doc_->document()->findBlock(transcript_->cursorForPosition(viewport_pos).position());
    if (!block.isValid()) return -1;
    const QRectF rect = doc_->document()->documentLayout()->blockBoundingRect(block);
    if (content.y() < rect.top() || content.y() >= rect.bottom()) return -1;
    return block.position();
}

void ChatView::showCodeCopyAt(int doc_pos) {
    const int first = doc_pos < 0 ? -1 : doc_->codeBlockLines(doc_pos).first;
    if (first == code_copy_line_ && (first < 0) == code_copy_->isHidden()) return;
    code_copy_line_ = first;
    placeCodeCopyButton();
}

void ChatView::placeCodeCopyButton() {
    const auto [first_line, last_line] = doc_->codeBlockLines(code_copy_line_);
    if (first_line < 0) {
        code_copy_line_ = -1;
        code_copy_->hide();
        return;
    }
    QAbstractTextDocumentLayout* layout = doc_->document()->documentLayout();
    const QPointF scroll(transcript_->horizontalScrollBar()->value(),
                         transcript_->verticalScrollBar()->value());
    const QRectF top = layout->blockBoundingRect(doc_->document()->findBlock(first_line));
    const QRectF bottom = layout->blockBoundingRect(doc_->document()->findBlock(last_line));
    const QRectF block = top.united(bottom).translated(-scroll);
    code_copy_->adjustSize();
    // The right edge of the code's background (the block format's right margin is 10 px),
    // at its top; while the top is scrolled away, at the viewport's top as long as the block
    // is still in view, so that a long block can be copied from its middle.
    const int right = std::min<int>(transcript_->viewport()->width(), int(block.right()) - 10);
    const int height = code_copy_->height();
    if (block.bottom() < kInset || block.top() > transcript_->viewport()->height()) {
        code_copy_->hide();
        return;
    }
    // A one-line block without a language label is shorter than the button (19 px against
    // 21 offscreen): the button is centred on it rather than left out.
    const int y =
        block.height() < height + 2 * kInset
            ? int(block.center().y()) - height / 2
            : std::clamp(kInset, int(block.top()) + kInset, int(block.bottom()) - height - kInset);
    code_copy_->move(right - code_copy_->width() - kInset, y);
    code_copy_->show();
    code_copy_->raise();
}

}  // namespace tokenscope::ui
