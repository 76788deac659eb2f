#include "memory_budget_view.h"
#include "number_format.h"

#include <QLabel>
#include <QPainter>
#include <QVBoxLayout>
#include <algorithm>
#include <array>
#include <cmath>

namespace tokenscope::ui {

namespace {

QString percent(double part, double whole) {
    if (!(whole > 0.0)) return QString();
    const double p = 100.0 * part / whole;
    return p < 1.0 && p > 0.0 ? QStringLiteral("<1%")
                              : QStringLiteral("%1%").arg(p, 0, 'f', p < 10.0 ? 1 : 0);
}

}  // namespace

StackedBar::StackedBar(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setFixedHeight(sizeHint().height());
}

void StackedBar::setSegments(const QVector<quint64>& values, const QVector<QColor>& colors,
                             quint64 capacity) {
    values_ = values;
    colors_ = colors;
    capacity_ = capacity;
    update();
}

QRect StackedBar::trackRect() const {
    return rect().adjusted(1, 1, -1, -1);
}

QRect StackedBar::segmentRect(int index) const {
    const QRect track = trackRect();
    quint64 sum = 0;
    for (quint64 v : values_) sum += v;
    const double scale_total = double(std::max(sum, capacity_));
    if (!(scale_total > 0.0) || index < 0 || index >= values_.size()) return {};
    // Cumulative edges rounded once each, so that adjacent segments neither overlap nor
    // leave a gap; the 2 px minimum pushes the following edges right.
    int left = track.left();
    for (int i = 0; i <= index; ++i) {
        quint64 before = 0;
        for (int j = 0; j < i; ++j) before += values_[j];
        const int edge_start =
            std::max(left, track.left() + int(std::lround(track.width() * (before / scale_total))));
        int edge_end =
            track.left() + int(std::lround(track.width() * ((before + values_[i]) / scale_total)));
        if (values_[i] > 0) edge_end = std::max(edge_end, edge_start + 2);
        edge_end = std::min(edge_end, track.right() + 1);
        if (i == index)
            return QRect(edge_start, track.top(), edge_end - edge_start, track.height());
        left = edge_end;
    }
    return {};
}

void StackedBar::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QPalette& pal = palette();
    const QRect track = trackRect();
    p.fillRect(track, pal.color(QPalette::AlternateBase));
    for (int i = 0; i < values_.size(); ++i) {
        const QRect r = segmentRect(i);
        if (r.width() > 0)
            p.fillRect(r, i < colors_.size() ? colors_[i] : pal.color(QPalette::Mid));
    }
    quint64 sum = 0;
    for (quint64 v : values_) sum += v;
    if (sum > capacity_ && capacity_ > 0) {
        // Over budget: the capacity line sits inside the bar; everything right of it does not
        // fit (the OS would swap, or the load fails).
        const int x =
            track.left() + int(std::lround(track.width() * (double(capacity_) / double(sum))));
        p.setPen(QPen(QColor(0xD0, 0x30, 0x30), 2));
        p.drawLine(x, rect().top(), x, rect().bottom());
    }
    p.setPen(pal.color(QPalette::Mid));
    p.setBrush(Qt::NoBrush);
    p.drawRect(rect().adjusted(0, 0, -1, -1));
}

QColor MemoryBudgetView::segmentColor(Segment segment) {
    switch (segment) {
        case Weights:
            return QColor(0x4C, 0x78, 0xC8);
        case KvCache:
            return QColor(0xE0, 0x8A, 0x2E);
        case Activations:
            return QColor(0x3F, 0xA6, 0x6B);
        case OtherGpu:
            return QColor(0x9A, 0x8C, 0x98);
    }
    return QColor(Qt::gray);
}

MemoryBudgetView::MemoryBudgetView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(4);
    auto heading = [this](const QString& text, QWidget* parent_widget) {
        auto* label = new QLabel(text, parent_widget);
        QFont bold = label->font();
        bold.setBold(true);
        label->setFont(bold);
        return label;
    };
    layout->addWidget(heading(tr("Memory (RAM)"), this));
    ram_bar_ = new StackedBar(this);
    layout->addWidget(ram_bar_);
    ram_label_ = new QLabel(this);
    ram_label_->setWordWrap(true);
    ram_label_->setToolTip(
        tr("%1: what new allocations can get without swapping (Linux: MemAvailable), read with "
           "the model loaded. tokenscope-cli inspect reports the same quantity in the same "
           "units.")
            .arg(available_ram_name()));
    layout->addWidget(ram_label_);
    ram_legend_ = new QLabel(this);
    ram_legend_->setTextFormat(Qt::RichText);
    ram_legend_->setWordWrap(true);
    layout->addWidget(ram_legend_);

    gpu_box_ = new QWidget(this);
    auto* gpu_layout = new QVBoxLayout(gpu_box_);
    gpu_layout->setContentsMargins(0, 8, 0, 0);
    gpu_layout->setSpacing(4);
    gpu_layout->addWidget(heading(tr("GPU memory"), gpu_box_));
    gpu_bar_ = new StackedBar(gpu_box_);
    gpu_layout->addWidget(gpu_bar_);
    gpu_label_ = new QLabel(gpu_box_);
    gpu_label_->setWordWrap(true);
    gpu_label_->setTextFormat(Qt::RichText);
    gpu_layout->addWidget(gpu_label_);
    layout->addWidget(gpu_box_);
    layout->addStretch(1);
    setData(MemoryBudgetData{});
}

QSize MemoryBudgetView::minimumSizeHint() const {
    return QWidget::minimumSizeHint().expandedTo(QSize(260, 120));
}

bool MemoryBudgetView::gpuVisible() const {
    return gpu_box_->isVisibleTo(this);
}

bool MemoryBudgetView::hasData() const {
    const MemoryBudgetData& d = data_;
    return d.weights_bytes > 0 || d.kv_cache_bytes > 0 || d.activation_bytes > 0 ||
           d.available_ram_bytes > 0 || d.gpu_total_bytes > 0;
}

quint64 MemoryBudgetView::ramCapacity() const {
    const MemoryBudgetData& d = data_;
    if (d.available_ram_bytes == 0) return 0;
    // available RAM is read with the model loaded. The CPU backend's KV cache and scratch are
    // already allocated, so it no longer counts them: the model can use them plus what is
    // available. The mapped weights are page cache, which it does count: they are measured
    // against it. With a GPU backend the cache and scratch are on the device.
    return d.gpu_total_bytes > 0 ? d.available_ram_bytes
                                 : d.available_ram_bytes + d.kv_cache_bytes + d.activation_bytes;
}

QString MemoryBudgetView::ramText() const {
    const MemoryBudgetData& d = data_;
    if (!hasData()) return tr("No model loaded.");
    const QString available =
        d.available_ram_bytes > 0
            ? tr("; %1: %2").arg(available_ram_name(), format_binary_bytes(d.available_ram_bytes))
            : QString();
    if (d.gpu_total_bytes > 0) {
        // GPU backend: RAM holds the mapped weight file; the rest is on the device.
        return tr("Weights %1 mapped in RAM; KV cache %2 and activations %3 on the GPU")
                   .arg(format_binary_bytes(d.weights_bytes), format_binary_bytes(d.kv_cache_bytes),
                        format_binary_bytes(d.activation_bytes)) +
               available;
    }
    const quint64 sum = d.weights_bytes + d.kv_cache_bytes + d.activation_bytes;
    QString text =
        tr("Weights %1 + KV cache %2 + activations %3 = %4")
            .arg(format_binary_bytes(d.weights_bytes), format_binary_bytes(d.kv_cache_bytes),
                 format_binary_bytes(d.activation_bytes), format_binary_bytes(sum)) +
        available;
    const quint64 capacity = ramCapacity();
    if (capacity > 0 && sum > capacity)
        text += tr(" — does not fit: %1 over").arg(format_binary_bytes(sum - capacity));
    return text;
}

QString MemoryBudgetView::gpuText() const {
    const MemoryBudgetData& d = data_;
    if (d.gpu_total_bytes == 0) return {};
    return tr("%1 used of %2 (%3); %4 free")
        .arg(format_binary_bytes(d.gpu_used_bytes), format_binary_bytes(d.gpu_total_bytes),
             percent(double(d.gpu_used_bytes), double(d.gpu_total_bytes)),
             format_binary_bytes(
                 d.gpu_total_bytes > d.gpu_used_bytes ? d.gpu_total_bytes - d.gpu_used_bytes : 0));
}

void MemoryBudgetView::clear() {
    setData(MemoryBudgetData{});
}

void MemoryBudgetView::setData(const MemoryBudgetData& data) {
    data_ = data;
    const QVector<QColor> colors = {segmentColor(Weights), segmentColor(KvCache),
                                    segmentColor(Activations), segmentColor(OtherGpu)};
    // With a GPU backend the KV cache and the scratch live on the device; RAM holds the mapped
    // weights (the file the device copy was made from).
    if (data.gpu_total_bytes > 0) {
        ram_bar_->setSegments({data.weights_bytes}, {colors[0]}, ramCapacity());
    } else {
        ram_bar_->setSegments({data.weights_bytes, data.kv_cache_bytes, data.activation_bytes},
                              colors, ramCapacity());
    }
    ram_label_->setText(ramText());
    auto swatch = [](const QColor& c) {
        return QStringLiteral("<span style=\"color:%1\">■</span>").arg(c.name());
    };
    ram_legend_->setText(
        tr("%1&nbsp;weights &nbsp; %2&nbsp;KV&nbsp;cache &nbsp; %3&nbsp;activations")
            .arg(swatch(colors[0]), swatch(colors[1]), swatch(colors[2])));

    gpu_box_->setVisible(data.gpu_total_bytes > 0);
    if (data.gpu_total_bytes > 0) {
        // On the device, the model's parts are shown when they account for the usage; the
        // rest of the used memory (cuBLAS workspace, CUDA context) is "other".
        const quint64 parts = data.weights_bytes + data.kv_cache_bytes + data.activation_bytes;
        if (parts > 0 && parts <= data.gpu_used_bytes) {
            gpu_bar_->setSegments({data.weights_bytes, data.kv_cache_bytes, data.activation_bytes,
                                   data.gpu_used_bytes - parts},
                                  colors, data.gpu_total_bytes);
        } else {
            gpu_bar_->setSegments({data.gpu_used_bytes}, {colors[3]}, data.gpu_total_bytes);
        }
        gpu_label_->setText(
            gpuText().toHtmlEscaped() + QStringLiteral("<br>") +
            tr("%1&nbsp;other (CUDA context, cuBLAS workspace)").arg(swatch(colors[3])));
    }
}

}  // namespace tokenscope::ui
