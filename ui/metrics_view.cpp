#include "metrics_view.h"
#include "number_format.h"

#include <QFrame>
#include <QGridLayout>
#include <QLabel>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "sparkline.h"
#include "speculation_explainer.h"

namespace tokenscope::ui {

namespace {

const QString kNone = QStringLiteral("—");

// Below this many computed prompt tokens the prefill tile shows the count instead of a rate.
// A short prefill is not the compute-bound batch that "prefill tok/s" measures: with a handful
// of tokens each matrix multiplication degenerates to a matrix-vector product, so the time is
// one pass over all weights plus fixed per-call costs, whatever the count. After Regenerate or a
// follow-up turn most of the prompt comes from the KV cache and 1 token is computed: 1 token in
// 53 ms printed as "18.9 tok/s" reads as a very slow prefill when it is not one. 16 tokens is
// where a batch starts to amortise the weight reads (and the CPU backend's matmul tiles fill).
constexpr qint64 kMinTokensForPrefillRate = 16;

QString format_ms(double ms) {
    if (!(ms > 0.0)) return kNone;
    if (ms >= 1000.0) return QStringLiteral("%1 s").arg(ms / 1000.0, 0, 'f', 2);
    if (ms >= 100.0) return QStringLiteral("%1 ms").arg(std::lround(ms));
    return QStringLiteral("%1 ms").arg(ms, 0, 'f', 1);
}

// Three significant digits are as many as run-to-run noise allows.
QString format_rate(double per_s, const QString& unit) {
    if (!(per_s > 0.0)) return kNone;
    if (per_s >= 1000.0) return group_digits(std::llround(per_s)) + QChar(0x00A0) + unit;
    const int decimals = per_s >= 100.0 ? 0 : (per_s >= 10.0 ? 1 : 2);
    return QString::number(per_s, 'f', decimals) + QChar(0x00A0) + unit;
}

}  // namespace

MetricsView::MetricsView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(8);
    grid_ = new QGridLayout;
    grid_->setHorizontalSpacing(16);
    grid_->setVerticalSpacing(8);
    layout->addLayout(grid_);

    addTile(QStringLiteral("ttft"), tr("Time to first token"),
            tr("From sending the prompt to the first generated token: mostly prefill"), 0, 0);
    addTile(QStringLiteral("prefill"), tr("Prefill"), prefillRateTip(), 0, 1);
    addTile(QStringLiteral("decode"), tr("Decode"),
            tr("Generated tokens per second (memory-bound: every weight is read once per "
               "token)"),
            0, 2);
    addTile(QStringLiteral("bandwidth"), tr("Effective bandwidth"),
            tr("Bytes read per decoded token × decode tokens per second"), 1, 0);
    addTile(QStringLiteral("prompt"), tr("Prompt tokens"), tr("Tokens in the prompt of this turn"),
            1, 1);
    addTile(QStringLiteral("reused"), tr("Reused from cache"),
            tr("Prompt tokens whose K/V were already in the cache from earlier turns: they "
               "were not computed again"),
            1, 2);
    addTile(QStringLiteral("acceptance"), tr("Accepted guesses"),
            tr("Speculative decoding: proposed tokens the model accepted (accepted of "
               "proposed, this reply)"),
            2, 0);
    addTile(QStringLiteral("plain"), tr("Plain decode"),
            tr("One token per decode step: what decoding runs at without speculation (the "
               "mean one-token step since the model was loaded)"),
            2, 1);
    addTile(QStringLiteral("speedup"), tr("Speedup"),
            tr("Effective decode rate (the Decode tile) over the plain decode rate"), 2, 2);
    for (int c = 0; c < 3; ++c) grid_->setColumnStretch(c, 1);

    why_free_ = new QToolButton(this);
    why_free_->setObjectName(QStringLiteral("whyFreeButton"));
    why_free_->setText(tr("Why is speculation free?"));
    why_free_->setIcon(style()->standardIcon(QStyle::SP_MessageBoxInformation));
    why_free_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    why_free_->setAutoRaise(true);
    why_free_->setToolTip(
        tr("How checking guessed tokens can cost nearly nothing, with this "
           "model's numbers"));
    connect(why_free_, &QToolButton::clicked, this, &MetricsView::showWhyFree);
    layout->addWidget(why_free_, 0, Qt::AlignLeft);

    auto* line = new QFrame(this);
    line->setFrameShape(QFrame::HLine);
    line->setFrameShadow(QFrame::Sunken);
    layout->addWidget(line);
    latency_caption_ = new QLabel(this);
    latency_caption_->setForegroundRole(QPalette::PlaceholderText);
    layout->addWidget(latency_caption_);
    sparkline_ = new Sparkline(this);
    sparkline_->setToolTip(tr("Milliseconds per generated token, oldest left, newest right"));
    layout->addWidget(sparkline_);
    layout->addStretch(1);

    setData(MetricsData{});
}

QSize MetricsView::minimumSizeHint() const {
    return QWidget::minimumSizeHint().expandedTo(QSize(300, 160));
}

QLabel* MetricsView::addTile(const QString& key, const QString& caption, const QString& tip,
                             int row, int column) {
    auto* box = new QVBoxLayout;
    box->setSpacing(0);
    auto* cap = new QLabel(caption, this);
    cap->setForegroundRole(QPalette::PlaceholderText);
    cap->setToolTip(tip);
    captions_.insert(key, cap);
    auto* value = new QLabel(kNone, this);
    QFont big = value->font();
    big.setPointSizeF(big.pointSizeF() * 1.35);
    big.setBold(true);
    value->setFont(big);
    value->setToolTip(tip);
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    box->addWidget(cap);
    box->addWidget(value);
    grid_->addLayout(box, row, column);
    values_.insert(key, value);
    return value;
}

QString MetricsView::prefillRateTip() {
    return tr("Prompt tokens processed per second (compute-bound: matrix multiplications)");
}

bool MetricsView::speculationRowVisible() const {
    return !values_.value(QStringLiteral("acceptance"))->isHidden();
}

void MetricsView::showWhyFree() {
    if (!why_free_popup_) {
        // A popup label: it closes on the next click elsewhere, like a tooltip that stays.
        why_free_popup_ = new QLabel(this, Qt::Popup);
        why_free_popup_->setObjectName(QStringLiteral("whyFreePopup"));
        why_free_popup_->setWordWrap(true);
        why_free_popup_->setTextFormat(Qt::RichText);
        why_free_popup_->setMargin(10);
        why_free_popup_->setFrameShape(QFrame::Box);
        why_free_popup_->setFixedWidth(420);
    }
    why_free_popup_->setText(speculationExplanation(data_));
    why_free_popup_->adjustSize();
    why_free_popup_->move(why_free_->mapToGlobal(QPoint(0, why_free_->height())));
    why_free_popup_->show();
}

QString MetricsView::valueToolTip(const QString& key) const {
    const QLabel* label = values_.value(key);
    return label ? label->toolTip() : QString();
}

void MetricsView::clear() {
    setData(MetricsData{});
}

QString MetricsView::valueText(const QString& key) const {
    if (key == QLatin1String("latency")) return latency_caption_->text();
    const QLabel* label = values_.value(key);
    return label ? label->text() : QString();
}

void MetricsView::setData(const MetricsData& data) {
    data_ = data;
    values_[QStringLiteral("ttft")]->setText(format_ms(data.ttft_ms));
    // Computed prompt tokens; producers that do not fill prefilled_tokens get the difference.
    const qint64 prefilled = data.prefilled_tokens > 0
                                 ? data.prefilled_tokens
                                 : std::max<qint64>(0, data.prompt_tokens - data.reused_tokens);
    QLabel* prefill = values_[QStringLiteral("prefill")];
    if (data.prompt_tokens > 0 && prefilled < kMinTokensForPrefillRate) {
        QString count =
            prefilled == 1 ? tr("1 token") : tr("%1 tokens").arg(group_digits(prefilled));
        if (data.reused_tokens > 0)
            count = tr("%1 (%2 reused)").arg(count, group_digits(data.reused_tokens));
        prefill->setText(count);
        prefill->setToolTip(
            tr("Prompt tokens computed this turn; the others came from the KV cache. Too few "
               "for a meaningful prefill rate: a rate is shown from %1 computed tokens on.")
                .arg(kMinTokensForPrefillRate));
    } else {
        prefill->setText(format_rate(data.prefill_tokens_per_s, "tok/s"));
        prefill->setToolTip(prefillRateTip());
    }
    values_[QStringLiteral("decode")]->setText(format_rate(data.decode_tokens_per_s, "tok/s"));
    captions_[QStringLiteral("decode")]->setText(data.speculating ? tr("Decode (effective)")
                                                                  : tr("Decode"));
    for (const char* key : {"acceptance", "plain", "speedup"}) {
        values_[QLatin1String(key)]->setVisible(data.speculating);
        captions_[QLatin1String(key)]->setVisible(data.speculating);
    }
    values_[QStringLiteral("acceptance")]->setText(
        data.proposed > 0 ? tr("%1 % (%2/%3)")
                                .arg(std::lround(100.0 * data.acceptanceRate()))
                                .arg(group_digits(data.accepted), group_digits(data.proposed))
                          : kNone);
    values_[QStringLiteral("plain")]->setText(format_rate(data.plainTokensPerS(), "tok/s"));
    values_[QStringLiteral("speedup")]->setText(
        data.plainTokensPerS() > 0 && data.decode_tokens_per_s > 0
            ? QStringLiteral("%1×").arg(data.decode_tokens_per_s / data.plainTokensPerS(), 0, 'f',
                                        2)
            : kNone);
    if (why_free_popup_ && why_free_popup_->isVisible())
        why_free_popup_->setText(speculationExplanation(data_));
    values_[QStringLiteral("bandwidth")]->setText(format_rate(data.effective_gbps, "GB/s"));
    values_[QStringLiteral("prompt")]->setText(
        data.prompt_tokens > 0 ? group_digits(data.prompt_tokens) : kNone);
    if (data.prompt_tokens > 0) {
        const double share = 100.0 * double(data.reused_tokens) / double(data.prompt_tokens);
        values_[QStringLiteral("reused")]->setText(
            tr("%1 (%2%)").arg(group_digits(data.reused_tokens)).arg(std::lround(share)));
    } else {
        values_[QStringLiteral("reused")]->setText(kNone);
    }

    sparkline_->setValues(data.token_ms);
    if (data.token_ms.isEmpty()) {
        latency_caption_->setText(tr("Per-token latency: no tokens yet"));
    } else {
        // Over the same window the sparkline shows, so the numbers describe the picture.
        const int max_points = sparkline_->maxPoints();
        const auto first = max_points > 0 && data.token_ms.size() > max_points
                               ? data.token_ms.end() - max_points
                               : data.token_ms.begin();
        const auto [lo, hi] = std::minmax_element(first, data.token_ms.end());
        double sum = 0.0;
        for (auto it = first; it != data.token_ms.end(); ++it) sum += *it;
        const auto count = std::distance(first, data.token_ms.end());
        latency_caption_->setText(
            tr("Per-token latency, last %1 tokens: min %2 · mean %3 · max %4")
                .arg(count)
                .arg(format_ms(*lo), format_ms(sum / double(count)), format_ms(*hi)));
    }
}

}  // namespace tokenscope::ui
