#include "distribution_chart.h"

#include <QHelpEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "message_document.h"
#include "runtime/sampling_stages.h"

namespace tokenscope::ui {

namespace rs = tokenscope::runtime::sampling;

ShapedDistribution shapeDistribution(const QVector<CandidateData>& candidates,
                                     const SamplingSettings& settings) {
    ShapedDistribution out;
    const int n = int(candidates.size());
    out.raw.fill(0.0, n);
    out.shaped.fill(0.0, n);
    if (n == 0) return out;

    // Raw: plain softmax in double over what is given.
    double max_logit = -INFINITY;
    for (const auto& c : candidates) max_logit = std::max(max_logit, double(c.logit));
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(candidates[i].logit) - max_logit);
    for (int i = 0; i < n; ++i)
        out.raw[i] = std::exp(double(candidates[i].logit) - max_logit) / sum;

    // Shaped: the engine's own stages, in the engine's order, so the chart cannot drift from
    // what the sampler does. `index` maps an item back to its row.
    rs::CandidateSet set;
    set.items.reserve(std::size_t(n));
    for (int i = 0; i < n; ++i) set.items.push_back({i, candidates[i].logit, 0.0f});
    // Items carry row indices as ids; they are put in the engine's ranking order (higher
    // logit, ties to the lower token id) here, so the stages see what the sampler would.
    std::sort(set.items.begin(), set.items.end(),
              [&](const rs::TokenLogit& a, const rs::TokenLogit& b) {
                  return a.logit > b.logit ||
                         (a.logit == b.logit && candidates[a.id].id < candidates[b.id].id);
              });
    set.sorted = true;
    if (!(settings.temperature > 0.0f)) {
        out.shaped[set.items.front().id] = 1.0;
        return out;
    }
    rs::top_k(set, settings.top_k);
    if (settings.top_p < 1.0f) rs::top_p(set, settings.top_p);
    if (settings.min_p > 0.0f) rs::min_p(set, settings.min_p);
    if (settings.temperature != 1.0f) rs::temperature(set, settings.temperature);
    rs::softmax(set);
    for (const auto& item : set.items) out.shaped[item.id] = double(item.probability);
    return out;
}

DistributionChart::DistributionChart(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Expanding);
    setAttribute(Qt::WA_OpaquePaintEvent, false);
    setToolTip(QString());  // per-row tooltips come from event()
}

void DistributionChart::setLastStep(const QVector<CandidateData>& before) {
    candidates_ = before;
    std::stable_sort(candidates_.begin(), candidates_.end(),
                     [](const CandidateData& a, const CandidateData& b) {
                         return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
                     });
    if (candidates_.size() > kMaxCandidates) candidates_.resize(kMaxCandidates);
    recompute();
}

void DistributionChart::clear() {
    candidates_.clear();
    placeholder_ = defaultPlaceholder();
    recompute();
}

QString DistributionChart::defaultPlaceholder() {
    return tr("No step yet.\nThe next token's candidates appear here.");
}

void DistributionChart::setPlaceholderText(const QString& text) {
    placeholder_ = text;
    update();
}

QStringList DistributionChart::legendLabels() const {
    return {beforeSettingsName(), afterSettingsName()};
}

void DistributionChart::setSettings(const SamplingSettings& settings) {
    settings_ = settings;
    recompute();
}

void DistributionChart::recompute() {
    dist_ = shapeDistribution(candidates_, settings_);
    updateGeometry();
    update();
}

QSize DistributionChart::sizeHint() const {
    const int rows = std::max<int>(8, int(candidates_.size()));
    return {340, fontMetrics().height() * 2 + rows * (fontMetrics().height() + 6) + 8};
}

QSize DistributionChart::minimumSizeHint() const {
    return {220, fontMetrics().height() * 8};
}

DistributionChart::Geometry DistributionChart::geometry() const {
    Geometry g;
    const QFontMetricsF fm(font());
    const QRectF r = QRectF(rect()).adjusted(6, 4, -6, -4);
    // The legend's two names are long: side by side where they fit, else one per line.
    const qreal swatch = fm.height() * 0.7 + 4;
    const QStringList labels = legendLabels();
    g.legend_lines =
        swatch + fm.horizontalAdvance(labels[0]) + 12 + swatch + fm.horizontalAdvance(labels[1]) <=
                r.width()
            ? 1
            : 2;
    g.legend = QRectF(r.left(), r.top(), r.width(), g.legend_lines * (fm.height() + 2) + 2);
    g.rows = QRectF(r.left(), g.legend.bottom() + 4, r.width(), r.bottom() - g.legend.bottom() - 4);
    const int n = std::max<int>(1, int(candidates_.size()));
    // Rows stay readable: never thinner than the text, never taller than twice it.
    g.row_height = std::clamp(g.rows.height() / n, fm.height() + 2, 2 * fm.height() + 4);
    qreal widest = 0;
    for (const auto& c : candidates_)
        widest = std::max(widest, fm.horizontalAdvance(visiblePiece(c.piece)));
    g.label_width =
        std::clamp(widest + 8, fm.horizontalAdvance(QStringLiteral("MMMM")), r.width() * 0.32);
    g.value_width = fm.horizontalAdvance(QStringLiteral("100.0%")) + 8;
    return g;
}

int DistributionChart::rowAt(const QPoint& pos) const {
    const Geometry g = geometry();
    if (!g.rows.contains(pos)) return -1;
    const int row = int((pos.y() - g.rows.top()) / g.row_height);
    return row < candidates_.size() ? row : -1;
}

bool DistributionChart::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const int row = rowAt(help->pos());
        if (row >= 0) {
            const CandidateData& c = candidates_[row];
            QToolTip::showText(
                help->globalPos(),
                tr("<code>%1</code> (id %2)<br>logit %3<br>%4: %5<br>%6: %7")
                    .arg(visiblePiece(c.piece).toHtmlEscaped())
                    .arg(c.id)
                    .arg(double(c.logit), 0, 'f', 3)
                    .arg(beforeSettingsName(), formatProbability(dist_.raw[row]),
                         afterSettingsName(),
                         dist_.shaped[row] > 0 ? formatProbability(dist_.shaped[row]) : tr("cut")),
                this);
        } else {
            QToolTip::hideText();
        }
        return true;
    }
    return QWidget::event(event);
}

void DistributionChart::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    p.fillRect(rect(), pal.color(QPalette::Base));
    const Geometry g = geometry();
    const QFontMetricsF fm(font());
    const QColor text = pal.color(QPalette::Text);
    QColor muted = text;
    muted.setAlphaF(0.5f);
    const QColor shaped_color = pal.color(QPalette::Highlight);
    QColor raw_color = text;
    raw_color.setAlphaF(0.28f);

    if (candidates_.isEmpty()) {
        p.setPen(muted);
        p.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap, placeholder_);
        return;
    }

    // Legend: what the two bars are.
    {
        qreal x = g.legend.left();
        const qreal sw = fm.height() * 0.7;
        const qreal line = g.legend.height() / g.legend_lines;
        qreal cy = g.legend.top() + line / 2;
        auto swatch = [&](const QColor& c, const QString& label) {
            p.setPen(Qt::NoPen);
            p.setBrush(c);
            p.drawRoundedRect(QRectF(x, cy - sw / 2, sw, sw), 2, 2);
            x += sw + 4;
            p.setPen(text);
            p.drawText(QPointF(x, cy + fm.ascent() / 2 - 1), label);
            x += fm.horizontalAdvance(label) + 12;
        };
        const QStringList labels = legendLabels();
        swatch(raw_color, labels[0]);
        if (g.legend_lines == 2) {
            x = g.legend.left();
            cy += line;
        }
        swatch(shaped_color, labels[1]);
    }

    double scale = 0.0;
    for (int i = 0; i < candidates_.size(); ++i)
        scale = std::max({scale, dist_.raw[i], dist_.shaped[i]});
    if (scale <= 0.0) scale = 1.0;

    const qreal bar_left = g.rows.left() + g.label_width;
    const qreal bar_width = std::max<qreal>(10, g.rows.width() - g.label_width - g.value_width);
    for (int i = 0; i < candidates_.size(); ++i) {
        const QRectF row(g.rows.left(), g.rows.top() + i * g.row_height, g.rows.width(),
                         g.row_height);
        if (row.top() > g.rows.bottom()) break;
        const bool cut = dist_.shaped[i] <= 0.0;
        if (i % 2 == 1) {
            QColor stripe = pal.color(QPalette::AlternateBase);
            p.fillRect(row, stripe);
        }
        // Label: the token piece with visible whitespace, right-aligned against the bars.
        p.setPen(cut ? muted : text);
        QFont label_font = font();
        label_font.setStrikeOut(cut);
        p.setFont(label_font);
        const QRectF label_rect(row.left(), row.top(), g.label_width - 6, row.height());
        p.drawText(
            label_rect, Qt::AlignRight | Qt::AlignVCenter,
            fm.elidedText(visiblePiece(candidates_[i].piece), Qt::ElideRight, label_rect.width()));
        p.setFont(font());

        // Raw bar (thin, behind) and shaped bar (solid) share one scale so they compare.
        const qreal inner = row.height() - 4;
        const qreal raw_w = bar_width * dist_.raw[i] / scale;
        const qreal shaped_w = bar_width * dist_.shaped[i] / scale;
        p.setPen(Qt::NoPen);
        p.setBrush(raw_color);
        p.drawRoundedRect(QRectF(bar_left, row.top() + 2, std::max<qreal>(raw_w, 1.5), inner), 2,
                          2);
        if (!cut) {
            p.setBrush(shaped_color);
            p.drawRoundedRect(QRectF(bar_left, row.top() + 2 + inner * 0.3,
                                     std::max<qreal>(shaped_w, 1.5), inner * 0.55),
                              2, 2);
        }
        p.setPen(cut ? muted : text);
        const QRectF value_rect(bar_left + bar_width, row.top(), g.value_width, row.height());
        p.drawText(value_rect, Qt::AlignRight | Qt::AlignVCenter,
                   cut ? tr("cut") : formatProbability(dist_.shaped[i]));
    }
}

}  // namespace tokenscope::ui
