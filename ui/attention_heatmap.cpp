#include "attention_heatmap.h"
#include "number_format.h"

#include <QAbstractScrollArea>
#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QPainter>
#include <QScrollBar>
#include <QSpinBox>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <array>
#include <cmath>

namespace tokenscope::ui {

namespace {

// Zoom steps in pixels per cell: 1..3 px give an overview of thousands of tokens, 14+ px leave
// room for readable labels on both axes.
constexpr std::array<int, 15> kZoomSteps = {1, 2, 3, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32, 40, 48};
// Longest side of a rendered image: 4096 px x 4096 px x 4 B = 64 MiB. Longer contexts are
// rendered with fewer pixels per cell and scaled up when painted.
constexpr int kMaxImageSide = 4096;
// Appended rows reuse the image while it has room; growing it in steps of this many cells
// keeps the copy cost of live generation amortised.
constexpr int kGrowCells = 64;
constexpr int kMaxLabelExtent = 120;
constexpr int kLabelPad = 6;

// Token text for an axis: whitespace made visible so that " the" and "the" differ.
QString axis_label(const QString& text) {
    QString out = text;
    out.replace(QLatin1Char('\n'), QStringLiteral("↵"));
    out.replace(QLatin1Char('\t'), QStringLiteral("⇥"));
    out.replace(QLatin1Char(' '), QStringLiteral("·"));
    if (out.isEmpty()) out = QStringLiteral("∅");
    return out;
}

// Token text for a tooltip: quoted as is, control characters escaped.
QString quoted(const QString& text) {
    QString out = text;
    out.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
    out.replace(QLatin1Char('\t'), QStringLiteral("\\t"));
    return QLatin1Char('\'') + out + QLatin1Char('\'');
}

QColor blend(const QColor& a, const QColor& b, double f) {
    return QColor::fromRgbF(float(a.redF() + (b.redF() - a.redF()) * f),
                            float(a.greenF() + (b.greenF() - a.greenF()) * f),
                            float(a.blueF() + (b.blueF() - a.blueF()) * f));
}

}  // namespace

// A horizontal strip of the colour map with its end values, so weights can be read off.
class ColorLegend : public QWidget {
  public:
    explicit ColorLegend(QWidget* parent) : QWidget(parent) {
        setToolTip(tr("Attention weight: 0 (left) to 1 (right)"));
    }
    void setScale(ColorScale scale) {
        scale_ = scale;
        update();
    }
    QSize sizeHint() const override {
        return {fontMetrics().horizontalAdvance(QStringLiteral("0 1")) + 90,
                fontMetrics().height()};
    }
    QSize minimumSizeHint() const override { return sizeHint(); }

  protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        const QFontMetrics fm = fontMetrics();
        const int zero_w = fm.horizontalAdvance(QStringLiteral("0")) + 4;
        const int one_w = fm.horizontalAdvance(QStringLiteral("1")) + 4;
        const QRect bar(zero_w, 3, width() - zero_w - one_w, height() - 6);
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(0, 0, zero_w, height()), Qt::AlignLeft | Qt::AlignVCenter,
                   QStringLiteral("0"));
        p.drawText(QRect(width() - one_w, 0, one_w, height()), Qt::AlignRight | Qt::AlignVCenter,
                   QStringLiteral("1"));
        // The strip shows the colour of the weight at each x under the chosen scale, so that
        // the legend matches the cells (a sqrt scale brightens the left part).
        for (int x = 0; x < bar.width(); ++x) {
            const float w = bar.width() > 1 ? float(x) / float(bar.width() - 1) : 0.0f;
            p.setPen(QColor(weight_color(w, scale_)));
            p.drawLine(bar.left() + x, bar.top(), bar.left() + x, bar.bottom());
        }
    }

  private:
    ColorScale scale_ = ColorScale::Sqrt;
};

// Own scrolling (instead of QScrollArea) so that the axis labels stay pinned to the top and
// left edges while the cells scroll underneath, and so that only visible cells are painted.
class HeatmapView : public QAbstractScrollArea {
  public:
    explicit HeatmapView(AttentionHeatmap* owner) : QAbstractScrollArea(owner), owner_(owner) {
        viewport()->setMouseTracking(true);
        viewport()->setBackgroundRole(QPalette::Base);
        viewport()->setAutoFillBackground(true);
        setFrameShape(QFrame::StyledPanel);
    }

    int leftMargin() const { return owner_->label_extent_ + 2 * kLabelPad; }
    int topMargin() const { return owner_->label_extent_ + 2 * kLabelPad; }
    int cell() const { return owner_->cell_; }
    int rows() const { return int(owner_->data_.rows.size()); }
    int columns() const { return owner_->columnCount(); }
    QPoint origin() const {
        return {leftMargin() - horizontalScrollBar()->value(),
                topMargin() - verticalScrollBar()->value()};
    }
    QRect dataArea() const {
        return QRect(leftMargin(), topMargin(), viewport()->width() - leftMargin(),
                     viewport()->height() - topMargin());
    }

    // -1 when pos is outside the cells.
    std::pair<int, int> cellAt(const QPoint& pos) const {
        if (!dataArea().contains(pos)) return {-1, -1};
        const QPoint rel = pos - origin();
        const int q = rel.y() / cell();
        const int k = rel.x() / cell();
        if (rel.x() < 0 || rel.y() < 0 || q >= rows() || k >= columns()) return {-1, -1};
        return {q, k};
    }

    void updateScrollBars() {
        const QRect area = dataArea();
        const bool follow = verticalScrollBar()->value() >= verticalScrollBar()->maximum() &&
                            verticalScrollBar()->maximum() > 0;
        horizontalScrollBar()->setRange(0, std::max(0, columns() * cell() - area.width()));
        horizontalScrollBar()->setPageStep(std::max(1, area.width()));
        horizontalScrollBar()->setSingleStep(std::max(1, cell()));
        verticalScrollBar()->setRange(0, std::max(0, rows() * cell() - area.height()));
        verticalScrollBar()->setPageStep(std::max(1, area.height()));
        verticalScrollBar()->setSingleStep(std::max(1, cell()));
        // While tokens stream in at the bottom, a view scrolled to the end stays there.
        if (follow) verticalScrollBar()->setValue(verticalScrollBar()->maximum());
        viewport()->update();
    }

    // Keeps the cell under `anchor` (viewport coordinates) in place while zooming.
    void zoomAround(const QPoint& anchor, int old_cell, int new_cell) {
        const QPoint rel = anchor - origin();
        const double fx = double(rel.x()) / old_cell;
        const double fy = double(rel.y()) / old_cell;
        owner_->cell_ = new_cell;
        updateScrollBars();
        horizontalScrollBar()->setValue(
            int(std::lround(fx * new_cell - (anchor.x() - leftMargin()))));
        verticalScrollBar()->setValue(int(std::lround(fy * new_cell - (anchor.y() - topMargin()))));
    }

  protected:
    void scrollContentsBy(int, int) override { viewport()->update(); }
    void resizeEvent(QResizeEvent* event) override {
        QAbstractScrollArea::resizeEvent(event);
        updateScrollBars();
    }

    void wheelEvent(QWheelEvent* event) override {
        if (event->modifiers() & Qt::ControlModifier) {
            const int delta = event->angleDelta().y();
            if (delta == 0) return;
            const int old_cell = cell();
            auto it = std::lower_bound(kZoomSteps.begin(), kZoomSteps.end(), old_cell);
            int next = old_cell;
            if (delta > 0) {
                auto up = std::upper_bound(kZoomSteps.begin(), kZoomSteps.end(), old_cell);
                if (up != kZoomSteps.end()) next = *up;
            } else if (it != kZoomSteps.begin()) {
                next = *std::prev(it);
            }
            if (next != old_cell) {
                const QPoint anchor = event->position().toPoint();
                owner_->setCellSize(next);  // re-renders if needed
                zoomAround(anchor, old_cell, next);
            }
            event->accept();
            return;
        }
        QAbstractScrollArea::wheelEvent(event);
    }

    void mouseMoveEvent(QMouseEvent* event) override {
        const auto hovered = cellAt(event->position().toPoint());
        if (hovered != hover_) {
            hover_ = hovered;
            viewport()->update();
        }
        QAbstractScrollArea::mouseMoveEvent(event);
    }

    bool viewportEvent(QEvent* event) override {
        if (event->type() == QEvent::ToolTip) {
            auto* help = static_cast<QHelpEvent*>(event);
            const QString text = owner_->toolTipAt(help->pos());
            if (text.isEmpty()) {
                QToolTip::hideText();
                event->ignore();
            } else {
                const auto [q, k] = cellAt(help->pos());
                const QRect cell_rect(origin() + QPoint(k * cell(), q * cell()),
                                      QSize(cell(), cell()));
                QToolTip::showText(help->globalPos(), text, viewport(), cell_rect);
            }
            return true;
        }
        if (event->type() == QEvent::Leave) {
            hover_ = {-1, -1};
            viewport()->update();
        }
        return QAbstractScrollArea::viewportEvent(event);
    }

    void paintEvent(QPaintEvent*) override {
        QPainter p(viewport());
        const QPalette& pal = palette();
        const QRect area = dataArea();
        const QPoint o = origin();
        const int c = cell();
        const int n_rows = rows();
        const int n_cols = columns();

        if (n_rows == 0) {
            p.setPen(pal.color(QPalette::PlaceholderText));
            p.drawText(viewport()->rect(), Qt::AlignCenter | Qt::TextWordWrap,
                       tr("No attention captured yet.\nSend a message with attention capture "
                          "on to see which tokens each token looks at."));
            return;
        }

        // Visible cell range.
        const int q0 = std::max(0, (area.top() - o.y()) / c);
        const int q1 = std::min(n_rows, (area.bottom() - o.y()) / c + 1);
        const int k0 = std::max(0, (area.left() - o.x()) / c);
        const int k1 = std::min(n_cols, (area.right() - o.x()) / c + 1);

        p.save();
        p.setClipRect(area);
        const QImage& img = owner_->image_;
        const int ic = owner_->image_cell_;
        const int img_q1 = std::min(q1, owner_->image_rows_);
        const int img_k1 = std::min(k1, owner_->image_cols_);
        if (!img.isNull() && img_q1 > q0 && img_k1 > k0) {
            const QRect target(o.x() + k0 * c, o.y() + q0 * c, (img_k1 - k0) * c,
                               (img_q1 - q0) * c);
            const QRect source(k0 * ic, q0 * ic, (img_k1 - k0) * ic, (img_q1 - q0) * ic);
            // Nearest-neighbour scaling: cells are meant to be crisp squares.
            p.setRenderHint(QPainter::SmoothPixmapTransform, false);
            p.drawImage(target, img, source);
        }
        if (hover_.first >= 0) {
            QPen pen(pal.color(QPalette::Highlight));
            pen.setWidth(2);
            p.setPen(pen);
            p.setBrush(Qt::NoBrush);
            p.drawRect(QRect(o + QPoint(hover_.second * c, hover_.first * c), QSize(c, c))
                           .adjusted(0, 0, -1, -1));
        }
        p.restore();

        // Axis labels: every `step`-th one so that they never overlap.
        QFont label_font = font();
        label_font.setPointSizeF(std::max(6.0, label_font.pointSizeF() * 0.85));
        p.setFont(label_font);
        const QFontMetrics fm(label_font);
        const int step = std::max(1, int(std::ceil(double(fm.height()) / c)));
        const int extent = owner_->label_extent_;
        const QColor text = pal.color(QPalette::Text);
        const QColor dim = pal.color(QPalette::PlaceholderText);
        const auto& labels = owner_->data_.labels;
        auto label_of = [&](int i) {
            return i < labels.size() ? axis_label(labels[i]) : QString::number(i);
        };

        p.save();
        p.setClipRect(QRect(0, area.top(), area.left(), area.height()));
        for (int q = q0 - q0 % step; q < q1; q += step) {
            if (q < 0) continue;
            const QRect r(kLabelPad, o.y() + q * c + c / 2 - fm.height() / 2, extent, fm.height());
            p.setPen(q == hover_.first ? pal.color(QPalette::Highlight) : text);
            p.drawText(r, Qt::AlignRight | Qt::AlignVCenter,
                       fm.elidedText(label_of(q), Qt::ElideRight, extent));
        }
        p.restore();

        p.save();
        p.setClipRect(QRect(area.left(), 0, area.width(), area.top()));
        for (int k = k0 - k0 % step; k < k1; k += step) {
            if (k < 0) continue;
            // Rotated so that long tokens fit in a column; read bottom-to-top.
            p.save();
            p.translate(o.x() + k * c + c / 2 + fm.ascent() / 2 - 1, area.top() - kLabelPad);
            p.rotate(-90);
            p.setPen(k == hover_.second ? pal.color(QPalette::Highlight) : text);
            p.drawText(QRect(0, -fm.ascent(), extent, fm.height()),
                       Qt::AlignLeft | Qt::AlignVCenter,
                       fm.elidedText(label_of(k), Qt::ElideRight, extent));
            p.restore();
        }
        p.restore();

        // Axis names in the corner.
        p.setPen(dim);
        p.drawText(
            QRect(kLabelPad, kLabelPad, area.left() - 2 * kLabelPad, area.top() - 2 * kLabelPad),
            Qt::AlignLeft | Qt::AlignTop, tr("key →"));
        p.drawText(
            QRect(kLabelPad, kLabelPad, area.left() - 2 * kLabelPad, area.top() - 2 * kLabelPad),
            Qt::AlignLeft | Qt::AlignBottom, tr("query ↓"));
        p.setPen(pal.color(QPalette::Mid));
        p.drawLine(area.left() - 1, area.top(), area.left() - 1, area.bottom());
        p.drawLine(area.left(), area.top() - 1, area.right(), area.top() - 1);
    }

  private:
    AttentionHeatmap* owner_;
    std::pair<int, int> hover_{-1, -1};
};

AttentionHeatmap::AttentionHeatmap(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->setSpacing(4);

    auto* bar = new QHBoxLayout;
    bar->setSpacing(6);
    layer_box_ = new QSpinBox(this);
    layer_box_->setObjectName(QStringLiteral("layerBox"));
    layer_box_->setPrefix(tr("layer "));
    layer_box_->setRange(0, 0);
    layer_box_->setToolTip(tr("Transformer layer (0 = closest to the input)"));
    head_box_ = new QComboBox(this);
    head_box_->setObjectName(QStringLiteral("headBox"));
    head_box_->setToolTip(tr("Attention head, or the mean over all heads of the layer"));
    head_box_->addItem(tr("mean of heads"), -1);
    scale_box_ = new QComboBox(this);
    scale_box_->setObjectName(QStringLiteral("scaleBox"));
    scale_box_->addItem(tr("linear"), int(ColorScale::Linear));
    scale_box_->addItem(tr("sqrt"), int(ColorScale::Sqrt));
    scale_box_->addItem(tr("log"), int(ColorScale::Log));
    scale_box_->setCurrentIndex(1);
    scale_box_->setToolTip(
        tr("Colour scale: sqrt and log make small weights visible next to large ones"));
    legend_ = new ColorLegend(this);
    legend_->setScale(scale_);

    auto tool = [this](const QString& text, const QString& tip) {
        auto* b = new QToolButton(this);
        b->setText(text);
        b->setToolTip(tip);
        b->setAutoRaise(true);
        return b;
    };
    auto* zoom_out = tool(QStringLiteral("−"), tr("Zoom out (Ctrl+wheel)"));
    auto* zoom_in = tool(QStringLiteral("+"), tr("Zoom in (Ctrl+wheel)"));
    auto* fit = tool(tr("Fit"), tr("Fit the whole matrix into the view"));
    zoom_label_ = new QLabel(this);
    zoom_label_->setMinimumWidth(fontMetrics().horizontalAdvance(QStringLiteral("48 px")) + 4);
    zoom_label_->setAlignment(Qt::AlignCenter);
    help_button_ = tool(QStringLiteral("?"), tr("What am I looking at?"));
    help_button_->setCheckable(true);
    help_button_->setObjectName(QStringLiteral("helpButton"));
    zoom_in->setObjectName(QStringLiteral("zoomIn"));
    zoom_out->setObjectName(QStringLiteral("zoomOut"));

    bar->addWidget(layer_box_);
    bar->addWidget(head_box_);
    bar->addWidget(scale_box_);
    bar->addWidget(legend_);
    bar->addStretch(1);
    bar->addWidget(zoom_out);
    bar->addWidget(zoom_label_);
    bar->addWidget(zoom_in);
    bar->addWidget(fit);
    bar->addWidget(help_button_);
    layout->addLayout(bar);

    view_ = new HeatmapView(this);
    layout->addWidget(view_, 1);
    status_ = new QLabel(this);
    status_->setForegroundRole(QPalette::PlaceholderText);
    layout->addWidget(status_);

    overlay_ = new QLabel(this);
    overlay_->setWordWrap(true);
    overlay_->setTextFormat(Qt::RichText);
    overlay_->setAutoFillBackground(true);
    overlay_->setBackgroundRole(QPalette::ToolTipBase);
    overlay_->setForegroundRole(QPalette::ToolTipText);
    overlay_->setFrameShape(QFrame::Box);
    overlay_->setMargin(8);
    overlay_->hide();

    connect(layer_box_, &QSpinBox::valueChanged, this, [this] { emitSelection(); });
    connect(head_box_, &QComboBox::currentIndexChanged, this, [this] { emitSelection(); });
    connect(scale_box_, &QComboBox::currentIndexChanged, this,
            [this](int index) { setColorScale(ColorScale(scale_box_->itemData(index).toInt())); });
    connect(zoom_in, &QToolButton::clicked, this, &AttentionHeatmap::zoomIn);
    connect(zoom_out, &QToolButton::clicked, this, &AttentionHeatmap::zoomOut);
    connect(fit, &QToolButton::clicked, this, &AttentionHeatmap::zoomToFit);
    connect(help_button_, &QToolButton::toggled, this, &AttentionHeatmap::setOverlayVisible);
    connect(&renderer_, &HeatmapRenderer::imageReady, this, &AttentionHeatmap::onImageReady);

    recomputeLabelExtent();
    updateStatus();
    updateOverlay();
    zoom_label_->setText(tr("%1 px").arg(cell_));
}

AttentionHeatmap::~AttentionHeatmap() = default;

QSize AttentionHeatmap::minimumSizeHint() const {
    return {320, 260};
}
QSize AttentionHeatmap::sizeHint() const {
    return {640, 560};
}

QWidget* AttentionHeatmap::viewport() const {
    return view_->viewport();
}

int AttentionHeatmap::columnCount() const {
    int columns = std::max(int(data_.labels.size()), int(data_.rows.size()));
    // A row may carry more weights than there are labels (labels arrive late): show them all.
    if (!data_.rows.isEmpty()) columns = std::max(columns, int(data_.rows.back().size()));
    return columns;
}

void AttentionHeatmap::setModelShape(int layers, int heads) {
    model_layers_ = std::max(0, layers);
    model_heads_ = std::max(0, heads);
    syncControls();
    updateOverlay();
}

QRgb AttentionHeatmap::maskedColor() const {
    // A neutral step away from the background: visible as "nothing here" in light and dark
    // palettes, and never confusable with the colour map's dark violet.
    const QPalette& pal = palette();
    return blend(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.08).rgb();
}

HeatmapRequest AttentionHeatmap::style() const {
    HeatmapRequest s;
    s.cell = renderCellFor(cell_, columnCount());
    s.columns = columnCount();
    s.scale = scale_;
    s.masked = maskedColor();
    s.gap = palette().color(QPalette::Base).rgb();
    return s;
}

int AttentionHeatmap::renderCellFor(int display_cell, int columns) const {
    const int cap = std::max(1, kMaxImageSide / std::max(1, columns));
    return std::clamp(display_cell, 1, cap);
}

void AttentionHeatmap::requestRender() {
    HeatmapRequest request = style();
    request.rows = data_.rows;  // implicitly shared: no copy unless one side changes it
    pending_ = true;
    renderer_.request(std::move(request));
    updateStatus();
}

void AttentionHeatmap::onImageReady(quint64, const QImage& image, int rows, int cell) {
    image_ = image;
    image_rows_ = rows;
    image_cell_ = cell;
    image_cols_ = image.isNull() ? 0 : image.width() / cell;
    pending_ = false;
    // Rows appended while the render ran are painted now, on top of the finished image.
    extendImage();
    view_->viewport()->update();
    updateStatus();
    emit imageUpdated();
}

void AttentionHeatmap::extendImage() {
    const int rows = int(data_.rows.size());
    const int columns = columnCount();
    if (rows == image_rows_ && columns == image_cols_) return;
    const HeatmapRequest s = [&] {
        HeatmapRequest r = style();
        r.cell = image_cell_;
        return r;
    }();
    const int c = image_cell_;
    if (image_.isNull() || image_.width() < columns * c || image_.height() < rows * c) {
        const int cap_cols = (columns + kGrowCells - 1) / kGrowCells * kGrowCells;
        const int cap_rows = (rows + kGrowCells - 1) / kGrowCells * kGrowCells;
        QImage grown(cap_cols * c, cap_rows * c, QImage::Format_RGB32);
        grown.fill(s.gap);
        if (!image_.isNull()) {
            QPainter p(&grown);
            p.setCompositionMode(QPainter::CompositionMode_Source);
            p.drawImage(QPoint(0, 0), image_,
                        QRect(0, 0, image_cols_ * c, std::min(image_rows_, rows) * c));
        }
        image_ = std::move(grown);
    }
    // New keys are in the future of every earlier query: their column is masked there.
    for (int k = image_cols_; k < columns; ++k) paint_masked_column(image_, k, image_rows_, s);
    for (int q = image_rows_; q < rows; ++q) paint_heatmap_row(image_, q, data_.rows[q], s);
    image_rows_ = rows;
    image_cols_ = columns;
}

QImage AttentionHeatmap::currentImage() const {
    if (image_.isNull() || image_rows_ == 0) return {};
    return image_.copy(0, 0, image_cols_ * image_cell_, image_rows_ * image_cell_);
}

void AttentionHeatmap::setData(const AttentionData& data) {
    data_ = data;
    recomputeLabelExtent();
    syncControls();
    view_->updateScrollBars();
    updateOverlay();
    requestRender();
}

void AttentionHeatmap::appendRow(const QVector<float>& weights, const QString& label) {
    const int q = int(data_.rows.size());
    data_.rows.append(weights);
    if (data_.labels.size() <= q) {
        while (data_.labels.size() < q) data_.labels.append(QString());
        data_.labels.append(label);
    } else {
        data_.labels[q] = label;
    }
    const QFontMetrics fm(font());
    const int w = std::min(kMaxLabelExtent, fm.horizontalAdvance(axis_label(label)));
    if (w > label_extent_) label_extent_ = w;

    view_->updateScrollBars();
    updateOverlay();
    if (pending_) {
        // The running render covers a prefix; onImageReady paints the rest.
        updateStatus();
        return;
    }
    if (image_.isNull() || renderCellFor(cell_, columnCount()) != image_cell_) {
        requestRender();
        return;
    }
    extendImage();
    view_->viewport()->update();
    updateStatus();
    emit imageUpdated();
}

void AttentionHeatmap::clear() {
    setData(AttentionData{data_.layer, data_.head, {}, {}});
}

void AttentionHeatmap::setCellSize(int pixels) {
    pixels = std::clamp(pixels, kZoomSteps.front(), kZoomSteps.back());
    if (pixels == cell_) return;
    const int old_render = renderCellFor(cell_, columnCount());
    cell_ = pixels;
    zoom_label_->setText(tr("%1 px").arg(cell_));
    view_->updateScrollBars();
    // Past the image size cap the same image is only scaled; below it, re-render crisply.
    if (renderCellFor(cell_, columnCount()) != old_render && !data_.rows.isEmpty()) {
        requestRender();
    }
}

void AttentionHeatmap::zoomIn() {
    auto up = std::upper_bound(kZoomSteps.begin(), kZoomSteps.end(), cell_);
    if (up == kZoomSteps.end()) return;
    const int old = cell_;
    const QPoint center = view_->dataArea().center();
    setCellSize(*up);
    view_->zoomAround(center, old, cell_);
}

void AttentionHeatmap::zoomOut() {
    auto it = std::lower_bound(kZoomSteps.begin(), kZoomSteps.end(), cell_);
    if (it == kZoomSteps.begin()) return;
    const int old = cell_;
    const QPoint center = view_->dataArea().center();
    setCellSize(*std::prev(it));
    view_->zoomAround(center, old, cell_);
}

void AttentionHeatmap::zoomToFit() {
    const QRect area = view_->dataArea();
    const int n = std::max(1, std::max(columnCount(), int(data_.rows.size())));
    const int fit = std::min(area.width(), area.height()) / n;
    int best = kZoomSteps.front();
    for (int step : kZoomSteps) {
        if (step <= fit) best = step;
    }
    setCellSize(best);
    view_->horizontalScrollBar()->setValue(0);
    view_->verticalScrollBar()->setValue(0);
}

void AttentionHeatmap::setColorScale(ColorScale scale) {
    if (scale == scale_) return;
    scale_ = scale;
    legend_->setScale(scale);
    const int index = scale_box_->findData(int(scale));
    if (index >= 0 && index != scale_box_->currentIndex()) {
        const QSignalBlocker block(scale_box_);
        scale_box_->setCurrentIndex(index);
    }
    if (!data_.rows.isEmpty()) requestRender();
}

bool AttentionHeatmap::overlayVisible() const {
    return overlay_->isVisibleTo(this);
}

void AttentionHeatmap::setOverlayVisible(bool visible) {
    if (help_button_->isChecked() != visible) {
        const QSignalBlocker block(help_button_);
        help_button_->setChecked(visible);
    }
    overlay_->setVisible(visible);
    if (visible) {
        placeOverlay();
        overlay_->raise();
    }
}

QString AttentionHeatmap::overlayText() const {
    const qint64 n = columnCount();
    const qint64 scores = n * (n + 1) / 2;
    QString cost = tr("n = %1 tokens: %1×%2/2 = %3 query-key scores per head per layer")
                       .arg(group_digits(n), group_digits(n + 1), group_digits(scores));
    if (model_heads_ > 0 && model_layers_ > 0) {
        cost += tr("; × %1 heads × %2 layers = %3 in total")
                    .arg(model_heads_)
                    .arg(model_layers_)
                    .arg(group_digits(scores * model_heads_ * model_layers_));
    }
    const qint64 doubled = 2 * n * (2 * n + 1) / 2;
    return tr("<b>Reading the map</b><br>"
              "Row = query token (the token being computed), column = key token it looks "
              "at. Each row is a softmax: its weights add up to 1. Bright = strong "
              "attention.<br><br>"
              "<b>Causal mask</b><br>"
              "The upper triangle is empty: a token cannot attend to later tokens, which "
              "do not exist yet when it is computed.<br><br>"
              "<b>Why cost grows with n²</b><br>"
              "Token q scores itself and every earlier token: q + 1 scores. %1. "
              "Twice the context (%2 tokens) needs %3 per head per layer: about four "
              "times as many.")
        .arg(cost, group_digits(2 * n), group_digits(doubled));
}

void AttentionHeatmap::updateOverlay() {
    overlay_->setText(overlayText());
    if (overlay_->isVisible()) placeOverlay();
}

void AttentionHeatmap::placeOverlay() {
    // Over the lower part of the map, leaving the toolbar usable to switch it off.
    const QRect area = view_->geometry();
    const int w = std::min(area.width() - 24, 460);
    const int h = overlay_->heightForWidth(w);
    overlay_->setGeometry(area.right() - w - 12, area.bottom() - std::min(h, area.height()) - 12, w,
                          std::min(h, area.height() - 24));
}

void AttentionHeatmap::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    if (overlay_->isVisible()) placeOverlay();
}

void AttentionHeatmap::changeEvent(QEvent* event) {
    QWidget::changeEvent(event);
    // The masked/gap colours come from the palette: a theme switch needs a new image.
    if (event->type() == QEvent::PaletteChange && !data_.rows.isEmpty()) requestRender();
    if (event->type() == QEvent::FontChange) recomputeLabelExtent();
}

void AttentionHeatmap::recomputeLabelExtent() {
    const QFontMetrics fm(font());
    int widest = fm.horizontalAdvance(tr("query ↓"));
    for (const QString& label : std::as_const(data_.labels)) {
        widest = std::max(widest, fm.horizontalAdvance(axis_label(label)));
        if (widest >= kMaxLabelExtent) break;
    }
    label_extent_ = std::min(widest, kMaxLabelExtent);
}

void AttentionHeatmap::syncControls() {
    const QSignalBlocker block_layer(layer_box_);
    const QSignalBlocker block_head(head_box_);
    layer_box_->setRange(0, std::max({0, model_layers_ - 1, data_.layer}));
    layer_box_->setValue(data_.layer);
    const int heads = std::max(model_heads_, data_.head + 1);
    if (head_box_->count() != heads + 1) {
        head_box_->clear();
        head_box_->addItem(tr("mean of heads"), -1);
        for (int h = 0; h < heads; ++h) head_box_->addItem(tr("head %1").arg(h), h);
    }
    const int index = head_box_->findData(data_.head);
    head_box_->setCurrentIndex(index >= 0 ? index : 0);
}

void AttentionHeatmap::emitSelection() {
    emit selectionChanged(layer_box_->value(), head_box_->currentData().toInt());
}

void AttentionHeatmap::updateStatus() {
    const int rows = int(data_.rows.size());
    if (rows == 0) {
        status_->setText(tr("No attention data"));
        return;
    }
    const QString head = data_.head < 0 ? tr("mean over heads") : tr("head %1").arg(data_.head);
    QString text = tr("%1 queries × %2 keys · layer %3 · %4")
                       .arg(rows)
                       .arg(columnCount())
                       .arg(data_.layer)
                       .arg(head);
    if (pending_) text += tr(" · rendering…");
    status_->setText(text);
}

QPoint AttentionHeatmap::cellCenter(int query, int key) const {
    return view_->origin() + QPoint(key * cell_ + cell_ / 2, query * cell_ + cell_ / 2);
}

QString AttentionHeatmap::toolTipAt(const QPoint& viewport_pos) const {
    const auto [q, k] = view_->cellAt(viewport_pos);
    if (q < 0) return {};
    return toolTipForCell(q, k);
}

QString AttentionHeatmap::toolTipForCell(int query, int key) const {
    if (query < 0 || key < 0 || query >= data_.rows.size() || key >= columnCount()) return {};
    auto label = [this](int i) { return i < data_.labels.size() ? data_.labels[i] : QString(); };
    // One multi-argument arg(): token text containing "%1" must not be substituted again.
    const QString pair = tr("query %1 (%2) → key %3 (%4)")
                             .arg(quoted(label(query)), QString::number(query), quoted(label(key)),
                                  QString::number(key));
    const auto& row = data_.rows[query];
    if (key > query) return pair + tr(": masked (a token cannot attend to later tokens)");
    if (key >= row.size()) return pair + tr(": not captured");
    return pair + QStringLiteral(": ") + QString::number(double(row[key]), 'f', 3);
}

}  // namespace tokenscope::ui
