#include "batch_timeline_view.h"

#include <QHelpEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>

namespace tokenscope::ui {

namespace {

constexpr int kMargin = 8;
constexpr int kLabelWidth = 170;
constexpr int kMinCellWidth = 6;
constexpr int kStripHeight = 56;  // tokens per step against the budget
constexpr int kRowHeight = 22;
constexpr int kAxisHeight = 18;
constexpr int kLegendHeight = 22;

}  // namespace

int BatchTimelineData::scheduledTokens(int step) const {
    int n = 0;
    for (const auto& c : steps.value(step)) n += c.tokens;
    return n;
}

QString BatchTimelineData::csv() const {
    QString out = QStringLiteral("step,request,kind,tokens\n");
    for (int s = 0; s < steps.size(); ++s) {
        for (int r = 0; r < steps[s].size(); ++r) {
            const auto& c = steps[s][r];
            if (c.kind == BatchTimelineCell::Absent) continue;
            out += QStringLiteral("%1,%2,%3,%4\n")
                       .arg(s)
                       .arg(r + 1)
                       .arg(batchKindName(c.kind))
                       .arg(c.tokens);
        }
    }
    return out;
}

QColor batchKindColor(int kind) {
    switch (kind) {
        case BatchTimelineCell::Prefill:
            return QColor(0x4C, 0x78, 0xA8);
        case BatchTimelineCell::Decode:
            return QColor(0x59, 0xA1, 0x4F);
        case BatchTimelineCell::Verify:
            return QColor(0xB0, 0x7A, 0xA1);
        case BatchTimelineCell::Waiting:
            return QColor(0xD9, 0xD9, 0xD9);
        case BatchTimelineCell::Preempted:
            return QColor(0xE1, 0x57, 0x59);
        default:
            return QColor(Qt::transparent);
    }
}

QString batchKindName(int kind) {
    switch (kind) {
        case BatchTimelineCell::Prefill:
            return QObject::tr("prefill");
        case BatchTimelineCell::Decode:
            return QObject::tr("decode");
        case BatchTimelineCell::Verify:
            return QObject::tr("verify");
        case BatchTimelineCell::Waiting:
            return QObject::tr("waiting");
        case BatchTimelineCell::Preempted:
            return QObject::tr("preempted");
        default:
            return QString();
    }
}

BatchTimelineView::BatchTimelineView(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("batchTimeline"));
    setMouseTracking(true);
}

void BatchTimelineView::setData(const BatchTimelineData& data) {
    data_ = data;
    setMinimumSize(sizeHint());
    updateGeometry();
    update();
}

int BatchTimelineView::cell_width() const {
    if (data_.steps.isEmpty()) return 12;
    const int room = width() - kLabelWidth - 2 * kMargin;
    return std::clamp(room / static_cast<int>(data_.steps.size()), kMinCellWidth, 28);
}

int BatchTimelineView::stepsThatFit(int width) {
    return std::max(1, (width - kLabelWidth - 2 * kMargin) / kMinCellWidth);
}

QSize BatchTimelineView::sizeHint() const {
    const int steps = static_cast<int>(data_.steps.size());
    const int rows = static_cast<int>(data_.rows.size());
    return {kLabelWidth + 2 * kMargin + std::max(1, steps) * kMinCellWidth,
            2 * kMargin + kStripHeight + rows * kRowHeight + kAxisHeight + kLegendHeight};
}

QRect BatchTimelineView::cellRect(int step, int row) const {
    if (data_.steps.isEmpty()) return {};
    const int w = cell_width();
    return {kMargin + kLabelWidth + step * w, kMargin + kStripHeight + row * kRowHeight, w,
            kRowHeight - 2};
}

void BatchTimelineView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p);
}

QImage BatchTimelineView::render() const {
    QImage image(size().expandedTo(sizeHint()), QImage::Format_RGB32);
    image.fill(palette().color(QPalette::Base));
    QPainter p(&image);
    paint(p);
    return image;
}

void BatchTimelineView::paint(QPainter& p) const {
    p.fillRect(rect(), palette().color(QPalette::Base));
    const QColor ink = palette().color(QPalette::Text);
    if (data_.steps.isEmpty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("Run the demo to see each engine step's schedule here."));
        return;
    }
    const int w = cell_width();
    const int steps = static_cast<int>(data_.steps.size());
    const int x0 = kMargin + kLabelWidth;

    // Tokens per step against the budget (the line).
    const int strip_top = kMargin + 14;
    const int strip_h = kStripHeight - 22;
    const int budget = std::max(1, data_.budget);
    int most = 1;
    for (int s = 0; s < steps; ++s) most = std::max(most, data_.scheduledTokens(s));
    // A budget far above every step (a server's 512 against decode steps of a few tokens)
    // would flatten the bars to nothing: then the scale is the steps' own and the line is left
    // out, which the label says.
    const bool budget_shown = budget <= 2 * most;
    if (budget_shown) most = std::max(most, budget);
    p.setPen(ink);
    p.drawText(QRect(kMargin, kMargin, kLabelWidth - 6, 14), Qt::AlignLeft | Qt::AlignVCenter,
               tr("tokens per step"));
    for (int s = 0; s < steps; ++s) {
        const int n = data_.scheduledTokens(s);
        const int h = n * strip_h / most;
        p.fillRect(x0 + s * w + 1, strip_top + strip_h - h, std::max(1, w - 2), h,
                   QColor(0x8C, 0x8C, 0x8C));
    }
    QPen budget_pen(QColor(0xC0, 0x39, 0x2B), 1.5, Qt::DashLine);
    p.setPen(budget_pen);
    if (budget_shown) {
        const int budget_y = strip_top + strip_h - budget * strip_h / most;
        p.drawLine(x0, budget_y, x0 + steps * w, budget_y);
    }
    // The budget's label under the strip's title, in the line's colour (the line itself is at
    // the strip's top whenever no step went over it).
    p.drawText(QRect(kMargin, strip_top + strip_h - 16, kLabelWidth - 6, 16),
               Qt::AlignLeft | Qt::AlignVCenter,
               budget_shown ? tr("- - budget %1").arg(data_.budget)
                            : tr("budget %1 (off scale)").arg(data_.budget));

    // One row per request.
    QFont small = p.font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.8));
    for (int r = 0; r < data_.rows.size(); ++r) {
        const int y = kMargin + kStripHeight + r * kRowHeight;
        p.setPen(ink);
        p.drawText(QRect(kMargin, y, kLabelWidth - 6, kRowHeight - 2),
                   Qt::AlignLeft | Qt::AlignVCenter,
                   p.fontMetrics().elidedText(data_.rows[r], Qt::ElideRight, kLabelWidth - 8));
        for (int s = 0; s < steps; ++s) {
            const BatchTimelineCell c = data_.steps[s].value(r);
            if (c.kind == BatchTimelineCell::Absent) continue;
            const QRect cell = cellRect(s, r).adjusted(0, 0, -1, 0);
            p.fillRect(cell, batchKindColor(c.kind));
            if (c.kind == BatchTimelineCell::Prefill && c.tokens > 1) {
                p.setFont(small);
                const QString label = QString::number(c.tokens);
                if (p.fontMetrics().horizontalAdvance(label) + 2 <= cell.width()) {
                    p.setPen(Qt::white);
                    p.drawText(cell, Qt::AlignCenter, label);
                }
                p.setFont(QFont());
            }
        }
    }

    // Step numbers.
    const int axis_y = kMargin + kStripHeight + static_cast<int>(data_.rows.size()) * kRowHeight;
    p.setPen(ink);
    const int every = w >= 20 ? 5 : (w >= 10 ? 10 : 20);
    for (int s = 0; s < steps; s += every) {
        p.drawText(QRect(x0 + s * w - 20, axis_y, 40 + w, kAxisHeight),
                   Qt::AlignHCenter | Qt::AlignVCenter, QString::number(s));
    }
    p.drawText(QRect(kMargin, axis_y, kLabelWidth - 6, kAxisHeight),
               Qt::AlignLeft | Qt::AlignVCenter, tr("engine step"));

    // Legend.
    int lx = x0;
    const int ly = axis_y + kAxisHeight + 4;
    for (int kind = BatchTimelineCell::Prefill; kind <= BatchTimelineCell::Preempted; ++kind) {
        p.fillRect(lx, ly + 3, 12, 12, batchKindColor(kind));
        p.setPen(ink);
        const QString name =
            kind == BatchTimelineCell::Prefill ? tr("prefill chunk (tokens)") : batchKindName(kind);
        p.drawText(lx + 16, ly, 200, 18, Qt::AlignLeft | Qt::AlignVCenter, name);
        lx += 16 + p.fontMetrics().horizontalAdvance(name) + 14;
    }
}

bool BatchTimelineView::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        const auto* help = static_cast<QHelpEvent*>(event);
        // The cell under the mouse, from the grid's arithmetic (cellRect's inverse).
        const QRect origin = cellRect(0, 0);
        const int w = cell_width();
        const int dx = help->pos().x() - origin.left();
        const int dy = help->pos().y() - origin.top();
        const int s = dx >= 0 ? dx / w : -1;
        const int r = dy >= 0 ? dy / kRowHeight : -1;
        const BatchTimelineCell c =
            s >= 0 && s < data_.steps.size() && r >= 0 && r < data_.rows.size()
                ? data_.steps[s].value(r)
                : BatchTimelineCell{};
        if (c.kind != BatchTimelineCell::Absent) {
            QToolTip::showText(help->globalPos(),
                               tr("step %1, request %2: %3%4")
                                   .arg(s)
                                   .arg(r + 1)
                                   .arg(batchKindName(c.kind))
                                   .arg(c.tokens > 0 ? tr(", %1 tokens").arg(c.tokens) : QString()),
                               this);
            return true;
        }
        QToolTip::hideText();
        event->ignore();
        return true;
    }
    return QWidget::event(event);
}

}  // namespace tokenscope::ui
