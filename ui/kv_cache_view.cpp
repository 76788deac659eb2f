#include "kv_cache_view.h"
#include "number_format.h"

#include <QEvent>
#include <QHelpEvent>
#include <QLabel>
#include <QMap>
#include <QPainter>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <array>
#include <cmath>

namespace tokenscope::ui {

namespace {

QColor blend(const QColor& a, const QColor& b, double f) {
    return QColor::fromRgbF(float(a.redF() + (b.redF() - a.redF()) * f),
                            float(a.greenF() + (b.greenF() - a.greenF()) * f),
                            float(a.blueF() + (b.blueF() - a.blueF()) * f));
}

// Q8 keeps one float scale per (token, layer, kv head) row next to the int8 values
// (engine/kv/kv_types.h); F16 has two bytes per value and nothing else.
constexpr int kQ8ScaleBytes = 4;

quint64 bytes_per_token_for(int layers, int kv_heads, int head_dim, double bytes_per_value,
                            int extra_per_row) {
    return quint64(2) * quint64(std::max(0, layers)) * quint64(std::max(0, kv_heads)) *
           quint64(std::llround(std::max(0, head_dim) * bytes_per_value + extra_per_row));
}

// Cell pitches, largest first: big cells while the map is small, smaller ones so that a
// cache of thousands of blocks still fits in a panel without endless scrolling.
constexpr std::array<int, 5> kPitches = {16, 12, 9, 6, 4};
constexpr int kMaxMapHeight = 220;

}  // namespace

// The fill level as a bar; turns to a warning colour when the cache is nearly full (the
// scheduler then starts queueing or preempting requests).
class OccupancyGauge : public QWidget {
  public:
    explicit OccupancyGauge(QWidget* parent) : QWidget(parent) {
        setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    }
    void setFraction(double f) {
        fraction_ = std::clamp(f, 0.0, 1.0);
        update();
    }
    QSize sizeHint() const override { return {240, fontMetrics().height() + 10}; }
    QSize minimumSizeHint() const override { return {120, fontMetrics().height() + 10}; }

  protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        p.setRenderHint(QPainter::Antialiasing, true);
        const QRectF r = QRectF(rect()).adjusted(0.5, 0.5, -0.5, -0.5);
        const QPalette& pal = palette();
        p.setPen(pal.color(QPalette::Mid));
        p.setBrush(pal.color(QPalette::AlternateBase));
        p.drawRoundedRect(r, 4, 4);
        QColor fill = pal.color(QPalette::Highlight);
        if (fraction_ >= 0.9) fill = QColor(0xE0, 0x6C, 0x2E);
        if (fraction_ > 0.0) {
            QRectF filled = r;
            filled.setWidth(std::max(8.0, r.width() * fraction_));
            p.setPen(Qt::NoPen);
            p.setBrush(fill);
            p.drawRoundedRect(filled, 4, 4);
        }
        // Text with the contrasting colour of whatever lies under its centre.
        const bool over_fill = fraction_ >= 0.5;
        p.setPen(over_fill ? pal.color(QPalette::HighlightedText) : pal.color(QPalette::Text));
        p.drawText(rect(), Qt::AlignCenter,
                   QStringLiteral("%1% full").arg(fraction_ * 100.0, 0, 'f', 1));
    }

  private:
    double fraction_ = 0.0;
};

KvBlockMap::KvBlockMap(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    setMouseTracking(true);
}

void KvBlockMap::setData(const KvBlockMapData& data) {
    const bool resized = data.block_owner.size() != data_.block_owner.size();
    data_ = data;
    if (resized) updateGeometry();
    update();
}

QColor KvBlockMap::ownerColor(qint64 owner) {
    // Golden-angle hue steps keep consecutive ids far apart on the colour wheel; ids whose
    // hues come close again (n and n + 5 differ by 32°) differ in parity, which alternates
    // saturation and value. Both variants read on white and on dark grey alike.
    const qint64 id = owner < 0 ? -owner : owner;
    const double hue = std::fmod(double(id) * 137.50776 + 200.0, 360.0);
    return id % 2 == 0 ? QColor::fromHsv(int(hue), 170, 225) : QColor::fromHsv(int(hue), 120, 190);
}

QColor KvBlockMap::freeColorFor(const QPalette& pal) {
    return blend(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.16);
}

int KvBlockMap::columnsFor(int width) const {
    const int n = std::max(1, blockCount());
    for (int pitch : kPitches) {
        const int columns = std::max(1, width / pitch);
        const int rows = (n + columns - 1) / columns;
        if (rows * pitch <= kMaxMapHeight || pitch == kPitches.back()) return columns;
    }
    return 1;
}

// The pitch is implied by the columns: width / columns, rounded down to a kPitches value.
QRect KvBlockMap::blockRect(int index) const {
    const int columns = columnsFor(width());
    int pitch = kPitches.back();
    for (int p : kPitches) {
        if (std::max(1, width() / p) == columns) {
            pitch = p;
            break;
        }
    }
    const int gap = pitch >= 9 ? 2 : 1;
    const int row = index / columns;
    const int col = index % columns;
    return QRect(col * pitch, row * pitch, pitch - gap, pitch - gap);
}

int KvBlockMap::blockAt(const QPoint& pos) const {
    if (blockCount() == 0) return -1;
    // Cells are laid out on a grid: check the candidate under pos (gaps excluded).
    const QRect first = blockRect(0);
    const QRect second = blockCount() > 1 ? blockRect(1) : first;
    const int pitch = blockCount() > 1 && second.top() == first.top() ? second.left() - first.left()
                                                                      : first.width() + 2;
    const int columns = columnsFor(width());
    const int index = (pos.y() / pitch) * columns + pos.x() / pitch;
    if (pos.x() < 0 || pos.y() < 0 || pos.x() / pitch >= columns || index >= blockCount())
        return -1;
    return blockRect(index).contains(pos) ? index : -1;
}

int KvBlockMap::heightForWidth(int width) const {
    const int columns = columnsFor(width);
    int pitch = kPitches.back();
    for (int p : kPitches) {
        if (std::max(1, width / p) == columns) {
            pitch = p;
            break;
        }
    }
    const int rows = (std::max(1, blockCount()) + columns - 1) / columns;
    return rows * pitch;
}

QSize KvBlockMap::sizeHint() const {
    return {320, heightForWidth(320)};
}
QSize KvBlockMap::minimumSizeHint() const {
    return {160, 32};
}

QString KvBlockMap::toolTipForBlock(int index) const {
    if (index < 0 || index >= blockCount()) return {};
    const qint64 owner = data_.block_owner[index];
    const int refs = index < data_.block_refs.size() ? data_.block_refs[index] : 0;
    const qint64 first = qint64(index) * data_.block_size;
    const QString tokens =
        tr("slots %1–%2").arg(first).arg(first + std::max(1, data_.block_size) - 1);
    if (owner < 0) return tr("block %1 · free · %2").arg(index).arg(tokens);
    QString text = tr("block %1 · sequence %2 · %3").arg(index).arg(owner).arg(tokens);
    if (refs >= 2) {
        text += tr(" · shared by %1 sequences (a common prefix stored once)").arg(refs);
    }
    return text;
}

bool KvBlockMap::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const int index = blockAt(help->pos());
        if (index < 0) {
            QToolTip::hideText();
            event->ignore();
        } else {
            QToolTip::showText(help->globalPos(), toolTipForBlock(index), this, blockRect(index));
        }
        return true;
    }
    return QWidget::event(event);
}

void KvBlockMap::paintEvent(QPaintEvent* event) {
    QPainter p(this);
    const QPalette& pal = palette();
    const QColor free = freeColor();
    const QColor mark = pal.color(QPalette::Text);
    for (int i = 0; i < blockCount(); ++i) {
        const QRect r = blockRect(i);
        if (!event->rect().intersects(r)) continue;
        const qint64 owner = data_.block_owner[i];
        const int refs = i < data_.block_refs.size() ? data_.block_refs[i] : 0;
        const QColor color = owner < 0 ? free : ownerColor(owner);
        p.fillRect(r, color);
        if (owner >= 0 && refs >= 2) {
            // Shared blocks: hatched and framed, so that they stand out in every owner colour.
            p.save();
            p.setClipRect(r);
            QColor hatch = mark;
            hatch.setAlphaF(0.45f);
            p.setPen(QPen(hatch, 1));
            for (int d = -r.height(); d < r.width(); d += 4) {
                p.drawLine(r.left() + d, r.bottom(), r.left() + d + r.height(), r.top());
            }
            p.restore();
            p.setPen(QPen(mark, 1));
            p.setBrush(Qt::NoBrush);
            p.drawRect(r.adjusted(0, 0, -1, -1));
        }
    }
    // The block the last step wrote into: a frame in the highlight colour, and a tick at the
    // slot of its last token (left = slot 0, right = the last slot of the block).
    const int last = data_.last_block;
    if (last >= 0 && last < blockCount() && event->rect().intersects(blockRect(last))) {
        const QRect r = blockRect(last);
        const QColor highlight = pal.color(QPalette::Highlight);
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(highlight, 2));
        p.drawRect(r.adjusted(1, 1, -1, -1));
        const int block_slots = std::max(1, data_.block_size);
        const int x = r.left() + 2 +
                      (r.width() - 5) * std::clamp(data_.last_slot, 0, block_slots - 1) /
                          std::max(1, block_slots - 1);
        p.setPen(QPen(mark, 2));
        p.drawLine(x, r.top() + 3, x, r.bottom() - 2);
    }
}

KvCacheView::KvCacheView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(6);
    gauge_ = new OccupancyGauge(this);
    occupancy_ = new QLabel(this);
    occupancy_->setWordWrap(true);
    map_ = new KvBlockMap(this);
    legend_ = new QLabel(this);
    legend_->setWordWrap(true);
    legend_->setTextFormat(Qt::RichText);
    last_write_ = new QLabel(this);
    last_write_->setWordWrap(true);
    last_write_->setObjectName("lastWrite");
    formula_ = new QLabel(this);
    formula_->setWordWrap(true);
    formula_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    comparison_ = new QLabel(this);
    comparison_->setWordWrap(true);
    comparison_->setForegroundRole(QPalette::PlaceholderText);

    auto heading = [this](const QString& text) {
        auto* label = new QLabel(text, this);
        QFont bold = label->font();
        bold.setBold(true);
        label->setFont(bold);
        return label;
    };
    layout->addWidget(heading(tr("KV cache occupancy")));
    layout->addWidget(gauge_);
    layout->addWidget(occupancy_);
    // Under the occupancy line rather than the legend: visible in a short dock during step mode.
    layout->addWidget(last_write_);
    layout->addSpacing(4);
    layout->addWidget(heading(tr("Blocks")));
    layout->addWidget(map_);
    layout->addWidget(legend_);
    layout->addSpacing(4);
    layout->addWidget(heading(tr("Why this size")));
    layout->addWidget(formula_);
    layout->addWidget(comparison_);
    layout->addStretch(1);
    setData(KvBlockMapData{});
}

QSize KvCacheView::minimumSizeHint() const {
    return QWidget::minimumSizeHint().expandedTo(QSize(280, 240));
}

double KvCacheView::occupancy() const {
    if (data_.usage_ratio >= 0.0 && data_.tokens_capacity <= 0)
        return std::clamp(data_.usage_ratio, 0.0, 1.0);
    if (data_.tokens_capacity <= 0) return 0.0;
    return std::clamp(double(data_.tokens_used) / double(data_.tokens_capacity), 0.0, 1.0);
}

QString KvCacheView::occupancyText() const {
    if (data_.usage_ratio >= 0.0 && data_.block_owner.isEmpty())
        return tr("%1% of the server's KV cache in use (its /metrics)")
            .arg(100.0 * data_.usage_ratio, 0, 'f', 1);
    const int blocks = int(data_.block_owner.size());
    int used = 0;
    int shared = 0;
    for (int i = 0; i < blocks; ++i) {
        if (data_.block_owner[i] < 0) continue;
        ++used;
        if (i < data_.block_refs.size() && data_.block_refs[i] >= 2) ++shared;
    }
    QString text =
        tr("%1 / %2 tokens · %3 / %4 · %5 / %6 blocks of %7 tokens")
            .arg(group_digits(data_.tokens_used), group_digits(data_.tokens_capacity),
                 format_bytes(double(data_.bytes_used)), format_bytes(double(data_.bytes_total)),
                 group_digits(used), group_digits(blocks), QString::number(data_.block_size));
    if (shared > 0) text += tr(" · %1 shared").arg(shared);
    return text;
}

QString KvCacheView::lastWriteText() const {
    const KvBlockMapData& d = data_;
    if (d.last_block < 0 || d.last_count <= 0) return {};
    const QString what = d.last_count == 1 ? tr("1 token (position %1)").arg(d.last_position)
                                           : tr("%1 tokens (positions %2–%3)")
                                                 .arg(d.last_count)
                                                 .arg(d.last_position)
                                                 .arg(d.last_position + d.last_count - 1);
    QString text = tr("Last write: %1 of sequence %2 → block %3, slot %4 of %5")
                       .arg(what)
                       .arg(d.last_owner)
                       .arg(d.last_block)
                       .arg(d.last_slot)
                       .arg(d.block_size);
    if (d.bytes_per_token > 0) {
        text += tr(" · +%1").arg(format_bytes(double(d.bytes_per_token) * d.last_count));
    }
    return text;
}

QString KvCacheView::formulaText() const {
    const KvBlockMapData& d = data_;
    if (!d.remote_note.isEmpty()) return d.remote_note;
    if (d.layers <= 0 || d.kv_heads <= 0 || d.head_dim <= 0) {
        return tr("Load a model to see how the cache size follows from its shape.");
    }
    const bool q8 = d.element_type.compare(QLatin1String("q8"), Qt::CaseInsensitive) == 0;
    const QString type = d.element_type.isEmpty() ? QStringLiteral("?") : d.element_type;
    QString per_value;
    quint64 computed = 0;
    if (q8) {
        per_value = tr("(%1 head dim × 1 B + %2 B scale) (%3)")
                        .arg(group_digits(d.head_dim), QString::number(kQ8ScaleBytes), type);
        computed = bytes_per_token_for(d.layers, d.kv_heads, d.head_dim, 1.0, kQ8ScaleBytes);
    } else {
        per_value = tr("%1 head dim × %2 B (%3)")
                        .arg(group_digits(d.head_dim), QString::number(d.bytes_per_element), type);
        computed = bytes_per_token_for(d.layers, d.kv_heads, d.head_dim, d.bytes_per_element, 0);
    }
    // The engine's number wins if it differs (it knows about padding this view does not).
    const quint64 per_token = d.bytes_per_token > 0 ? d.bytes_per_token : computed;
    return tr("2 (K and V) × %1 layers × %2 kv heads × %3 = %4 B per token; × %5 tokens = %6")
        .arg(group_digits(d.layers), group_digits(d.kv_heads), per_value,
             group_digits(qint64(per_token)), group_digits(d.tokens_used),
             format_bytes(double(per_token) * double(d.tokens_used)));
}

QString KvCacheView::comparisonText() const {
    const KvBlockMapData& d = data_;
    if (!d.remote_note.isEmpty() || d.layers <= 0 || d.kv_heads <= 0 || d.head_dim <= 0) return {};
    const quint64 f16 = bytes_per_token_for(d.layers, d.kv_heads, d.head_dim, 2.0, 0);
    const quint64 q8 = bytes_per_token_for(d.layers, d.kv_heads, d.head_dim, 1.0, kQ8ScaleBytes);
    const qint64 tokens = d.tokens_capacity > 0 ? d.tokens_capacity : d.tokens_used;
    const double saved = 100.0 * (1.0 - double(q8) / double(f16));
    return tr("F16 vs Q8 for this model, full cache of %1 tokens: F16 %2 B/token = %3 · Q8 %4 "
              "B/token = %5 (%6% less, slightly less precise). The element type is chosen "
              "when the model is loaded; this one uses %7.")
        .arg(group_digits(tokens), group_digits(qint64(f16)),
             format_bytes(double(f16) * double(tokens)), group_digits(qint64(q8)),
             format_bytes(double(q8) * double(tokens)), QString::number(std::lround(saved)),
             d.element_type.isEmpty() ? tr("an unknown type") : d.element_type);
}

void KvCacheView::clear() {
    setData(KvBlockMapData{});
}

void KvCacheView::setData(const KvBlockMapData& data) {
    data_ = data;
    gauge_->setFraction(occupancy());
    occupancy_->setText(occupancyText());
    map_->setData(data);

    updateLegend();
    last_write_->setText(lastWriteText());
    last_write_->setVisible(!last_write_->text().isEmpty());
    formula_->setText(formulaText());
    comparison_->setText(comparisonText());
}

void KvCacheView::changeEvent(QEvent* event) {
    QWidget::changeEvent(event);
    // The free-block swatch is baked into the legend's HTML from the palette.
    if (event->type() == QEvent::PaletteChange) updateLegend();
}

void KvCacheView::updateLegend() {
    // Legend: one swatch per owner present, then free and shared.
    QMap<qint64, int> per_owner;
    int free = 0;
    int shared = 0;
    for (int i = 0; i < data_.block_owner.size(); ++i) {
        const qint64 owner = data_.block_owner[i];
        if (owner < 0) {
            ++free;
            continue;
        }
        ++per_owner[owner];
        if (i < data_.block_refs.size() && data_.block_refs[i] >= 2) ++shared;
    }
    auto swatch = [](const QColor& c) {
        return QStringLiteral("<span style=\"color:%1\">■</span>").arg(c.name());
    };
    QStringList parts;
    constexpr int kMaxOwnersListed = 8;
    int listed = 0;
    for (auto it = per_owner.cbegin(); it != per_owner.cend(); ++it) {
        if (listed++ == kMaxOwnersListed) {
            parts << tr("+%1 more").arg(per_owner.size() - kMaxOwnersListed);
            break;
        }
        parts << swatch(KvBlockMap::ownerColor(it.key())) +
                     tr("&nbsp;seq&nbsp;%1:&nbsp;%2").arg(it.key()).arg(it.value());
    }
    parts << swatch(KvBlockMap::freeColorFor(palette())) + tr("&nbsp;free:&nbsp;%1").arg(free);
    if (shared > 0) parts << tr("▨&nbsp;shared&nbsp;(refs&nbsp;≥&nbsp;2):&nbsp;%1").arg(shared);
    legend_->setText(data_.block_owner.isEmpty() ? tr("No cache allocated")
                                                 : parts.join(QStringLiteral(" &nbsp; ")));
}

}  // namespace tokenscope::ui
