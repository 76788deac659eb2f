#include "sparkline.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {
// Room around the plot so that the end-point dot is not clipped at the edges.
constexpr int kMargin = 3;
}  // namespace

Sparkline::Sparkline(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setFixedHeight(sizeHint().height());
}

void Sparkline::setMaxPoints(int count) {
    max_points_ = std::max(0, count);
    update();
}

void Sparkline::setValues(const QVector<double>& values) {
    values_ = values;
    update();
}

void Sparkline::appendValue(double value) {
    values_.append(value);
    // Keep a bounded history: the widget only ever shows the newest max_points_ values.
    if (max_points_ > 0 && values_.size() > 4 * max_points_) {
        values_.remove(0, values_.size() - max_points_);
    }
    update();
}

QVector<double> Sparkline::visibleValues() const {
    if (max_points_ > 0 && values_.size() > max_points_) {
        return values_.mid(values_.size() - max_points_);
    }
    return values_;
}

QRect Sparkline::plotRect() const {
    return rect().adjusted(kMargin, kMargin, -kMargin, -kMargin);
}

QColor Sparkline::lineColor() const {
    return palette().color(QPalette::Highlight);
}

int Sparkline::yFor(double value) const {
    const QVector<double> shown = visibleValues();
    double max = 0.0;
    for (double v : shown) max = std::max(max, std::isfinite(v) ? v : 0.0);
    const QRect plot = plotRect();
    if (max <= 0.0) return plot.bottom();
    const double f = std::clamp(value / max, 0.0, 1.0);
    return plot.bottom() - int(std::lround(f * (plot.height() - 1)));
}

void Sparkline::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QRect plot = plotRect();
    const QVector<double> shown = visibleValues();
    // Baseline (zero) in a quiet colour, visible in light and dark palettes.
    p.setPen(palette().color(QPalette::Mid));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    if (shown.isEmpty()) return;

    const int n = int(shown.size());
    auto x_for = [&](int i) {
        if (n == 1) return double(plot.right());
        return plot.left() + double(i) * (plot.width() - 1) / double(n - 1);
    };
    // Pixel centres (+0.5) so that a 1 px line at the maximum covers exactly the top row.
    QPainterPath line;
    for (int i = 0; i < n; ++i) {
        const QPointF pt(x_for(i) + 0.5, yFor(shown[i]) + 0.5);
        if (i == 0) {
            line.moveTo(pt);
        } else {
            line.lineTo(pt);
        }
    }
    QColor fill = lineColor();
    fill.setAlphaF(0.18f);
    QPainterPath area = line;
    area.lineTo(x_for(n - 1) + 0.5, plot.bottom() + 0.5);
    area.lineTo(x_for(0) + 0.5, plot.bottom() + 0.5);
    area.closeSubpath();
    p.fillPath(area, fill);

    p.setRenderHint(QPainter::Antialiasing, true);
    p.setPen(QPen(lineColor(), 1.5, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
    p.drawPath(line);
    // The newest value as a dot: where the live stream currently is.
    p.setBrush(lineColor());
    p.setPen(Qt::NoPen);
    p.drawEllipse(QPointF(x_for(n - 1) + 0.5, yFor(shown.back()) + 0.5), 2.5, 2.5);
}

}  // namespace tokenscope::ui
