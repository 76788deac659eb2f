// ChatView's attention overlay: the toggle, the legend and the extra selections that
// ChatAttentionOverlay computes (see chat_attention_overlay.h).
#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "chat_attention_overlay.h"
#include "chat_view.h"

namespace tokenscope::ui {

namespace {
// Orange keys and a translucent blue for the hovered token: both readable over the light and
// the dark palette, and distinct from the probability tints' red-yellow-green.
const QColor kKeyHue(255, 140, 0);
const QColor kFocus(30, 144, 255, 150);
}  // namespace

void ChatView::buildAttentionControls(QHBoxLayout* toggles, QVBoxLayout* layout) {
    overlay_ = std::make_unique<ChatAttentionOverlay>();
    attention_toggle_ = new QCheckBox(tr("&Attention on hover"), this);
    attention_toggle_->setObjectName(QStringLiteral("attentionToggle"));
    attention_toggle_->setToolTip(
        tr("Hover a token to tint the earlier text by how much this token attends to it (the "
           "layer and head chosen in the Attention panel). The darker the tint, the larger the "
           "weight, relative to the token's strongest."));
    toggles->addWidget(attention_toggle_);
    connect(attention_toggle_, &QCheckBox::toggled, this, &ChatView::setAttentionOverlay);

    attention_legend_ = new QLabel(this);
    attention_legend_->setObjectName(QStringLiteral("attentionLegend"));
    attention_legend_->setWordWrap(true);
    attention_legend_->setContentsMargins(6, 0, 6, 0);
    attention_legend_->setTextFormat(Qt::PlainText);
    // Two lines, always: a legend that grew or shrank with each hovered token would move the
    // transcript under the mouse, and the move would hover another token.
    attention_legend_->setFixedHeight(2 * attention_legend_->fontMetrics().lineSpacing() + 2);
    attention_legend_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    attention_legend_->setToolTip(
        tr("The hovered token's strongest keys with their weights, and the share of its "
           "attention on tokens the chat does not show. Tints are relative to the strongest key "
           "in the shown text."));
    attention_legend_->hide();
    layout->addWidget(attention_legend_);
}

bool ChatView::attentionOverlay() const {
    return attention_toggle_ && attention_toggle_->isChecked();
}

QString ChatView::attentionLegendText() const {
    return attention_legend_->text();
}

void ChatView::setAttentionOverlay(bool on) {
    if (attention_toggle_->isChecked() != on) attention_toggle_->setChecked(on);
    if (attention_legend_->isHidden() != on) return;  // already in that state
    attention_legend_->setVisible(on);
    attention_dirty_ = true;
    showAttentionAt(on ? attention_doc_pos_ : -1);
    emit attentionOverlayChanged(on);
}

void ChatView::setAttentionData(const AttentionData& data) {
    overlay_->setData(data);
    attention_dirty_ = true;
    if (attentionOverlay()) showAttentionAt(attention_doc_pos_);
}

void ChatView::clearAttentionData() {
    setAttentionData({});
}

void ChatView::showAttentionAt(int doc_pos) {
    attention_doc_pos_ = doc_pos;
    const int q = attentionOverlay() ? overlay_->positionAt(*doc_, doc_pos) : -1;
    // Moving within one token (most mouse moves) changes nothing: no row to sort, no repaint.
    if (q == attention_position_ && !attention_dirty_) return;
    ChatAttentionOverlay::View view;
    if (attentionOverlay()) view = overlay_->viewOf(*doc_, q, kKeyHue, kFocus);
    attention_legend_->setText(view.legend);
    attention_position_ = view.position;
    attention_dirty_ = false;
    transcript_->setExtraSelections(view.selections);
}

}  // namespace tokenscope::ui
