#include "attention_heatmap.h"
#include "number_format.h"

#include <QAbstractScrollArea>
#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QPainter>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QStyle>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

namespace tokenscope::ui {

namespace {

// Zoom steps in pixels per cell: 1..3 px give an overview of thousands of tokens, 14+ px leave
// room for readable labels on both axes.
constexpr std::array<int, 15> kZoomSteps = {1, 2, 3, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32, 40, 48};
// Zooming out past 1 px per token: tokens per pixel (Fit uses whatever factor fits exactly).
constexpr std::array<int, 12> kDownSteps = {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96};
// The cell size of a panel the user has not zoomed: the largest step up to kDefaultCell that
// shows at least kAutoMinRows query rows, but not below kAutoMinCell (labels need room).
constexpr int kDefaultCell = 14;
constexpr int kAutoMinCell = 6;
constexpr int kAutoMinRows = 20;
// Longest side of a rendered image: 4096 px x 4096 px x 4 B = 64 MiB. Longer contexts are
// rendered with fewer pixels per cell (or downsampled) and scaled up when painted.
constexpr int kMaxImageSide = 4096;
// Appended rows reuse the image while it has room; growing it in steps of this many cells
// keeps the copy cost of live generation amortised.
constexpr int kGrowCells = 64;
constexpr int kMaxLabelExtent = 120;
// The label strips never take more than a quarter of the view's width (query labels) or a
// sixth of its height (rotated key labels, which would otherwise push the rows out of a small
// dock), but keep room for the "key →"/"query ↓" corner.
constexpr int kMinLabelExtent = 28;
constexpr int kLabelPad = 4;
// The help overlay: readable line length on wide panels, a small gap to the view's edges.
constexpr int kOverlayMaxWidth = 460;
constexpr int kOverlayMargin = 6;

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
    QSize minimumSizeHint() const override {
        return {fontMetrics().horizontalAdvance(QStringLiteral("0 1")) + 30,
                fontMetrics().height()};
    }

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

// One line of text that elides instead of demanding its full width, so that a long status
// ("684 queries × 684 keys · layer 5 · mean over heads") never widens a narrow dock.
class ElidedLabel : public QWidget {
  public:
    explicit ElidedLabel(QWidget* parent) : QWidget(parent) {
        setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    }
    void setText(const QString& text) {
        if (text == text_) return;
        text_ = text;
        setToolTip(text);
        updateGeometry();
        update();
    }
    QString text() const { return text_; }
    QSize sizeHint() const override {
        return {fontMetrics().horizontalAdvance(text_) + 2, fontMetrics().height()};
    }
    QSize minimumSizeHint() const override { return {0, fontMetrics().height()}; }

  protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignLeft | Qt::AlignVCenter,
                   fontMetrics().elidedText(text_, Qt::ElideRight, width()));
    }

  private:
    QString text_;
};

// Own scrolling (instead of QScrollArea) so that the axis labels stay pinned to the top and
// left edges while the cells scroll underneath, and so that only visible cells are painted.
//
// Screen geometry: with ds = tokensPerPixel() > 1 token t lies in pixel t / ds; otherwise it
// takes cellSize() pixels from t * cell.
class HeatmapView : public QAbstractScrollArea {
  public:
    explicit HeatmapView(AttentionHeatmap* owner) : QAbstractScrollArea(owner), owner_(owner) {
        viewport()->setMouseTracking(true);
        viewport()->setBackgroundRole(QPalette::Base);
        viewport()->setAutoFillBackground(true);
        setFrameShape(QFrame::StyledPanel);
    }

    // Label strips, capped by the view's own size (not the viewport's, which changes with the
    // scroll bars and would feed back into the scroll ranges).
    int leftExtent() const {
        return std::min(owner_->label_extent_, std::max(kMinLabelExtent, width() / 4));
    }
    int topExtent() const {
        return std::min(owner_->label_extent_, std::max(kMinLabelExtent, height() / 6));
    }
    int leftMargin() const { return leftExtent() + 2 * kLabelPad; }
    int topMargin() const { return topExtent() + 2 * kLabelPad; }

    int ds() const { return owner_->ds_; }
    int cell() const { return owner_->cell_; }
    // Screen pixels of one painted unit: a cell, or one pixel (a block) while downsampled.
    int unit() const { return ds() > 1 ? 1 : cell(); }
    double pxPerToken() const { return ds() > 1 ? 1.0 / ds() : double(cell()); }
    int tokenPx(int t) const { return ds() > 1 ? t / ds() : t * cell(); }
    int extentPx(int n) const { return ds() > 1 ? (n + ds() - 1) / ds() : n * cell(); }
    int tokenAtPx(int px) const { return ds() > 1 ? px * ds() : px / cell(); }

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
    QRect contentRect() const {
        return QRect(origin(), QSize(extentPx(columns()), extentPx(rows())));
    }
    // dataArea() once the scroll bars match the current zoom. QAbstractScrollArea shows or
    // hides them later (on a posted layout request), so scroll ranges and zoom targets use
    // this prediction: a bar is shown exactly when its range is not empty.
    QRect settledDataArea() const {
        const int room_w = contentsRect().width() - leftMargin();
        const int room_h = contentsRect().height() - topMargin();
        const int content_w = extentPx(columns());
        const int content_h = extentPx(rows());
        const int bar_w = verticalScrollBar()->sizeHint().width();
        const int bar_h = horizontalScrollBar()->sizeHint().height();
        bool need_h = content_w > room_w;
        bool need_v = content_h > room_h;
        if (need_h && !need_v) need_v = content_h > room_h - bar_h;
        if (need_v && !need_h) need_h = content_w > room_w - bar_w;
        return QRect(leftMargin(), topMargin(), room_w - (need_v ? bar_w : 0),
                     room_h - (need_h ? bar_h : 0));
    }

    // -1 when pos is outside the cells.
    std::pair<int, int> cellAt(const QPoint& pos) const {
        if (!dataArea().contains(pos)) return {-1, -1};
        const QPoint rel = pos - origin();
        if (rel.x() < 0 || rel.y() < 0) return {-1, -1};
        const int q = tokenAtPx(rel.y());
        const int k = tokenAtPx(rel.x());
        if (q >= rows() || k >= columns()) return {-1, -1};
        return {q, k};
    }

    // `follow`: a view scrolled to the bottom stays there while tokens stream in. Zooming
    // places the view itself and passes false.
    void updateScrollBars(bool follow = true) {
        const QRect area = settledDataArea();
        follow = follow && verticalScrollBar()->value() >= verticalScrollBar()->maximum() &&
                 verticalScrollBar()->maximum() > 0;
        horizontalScrollBar()->setRange(0, std::max(0, extentPx(columns()) - area.width()));
        horizontalScrollBar()->setPageStep(std::max(1, area.width()));
        horizontalScrollBar()->setSingleStep(std::max(1, unit()));
        verticalScrollBar()->setRange(0, std::max(0, extentPx(rows()) - area.height()));
        verticalScrollBar()->setPageStep(std::max(1, area.height()));
        verticalScrollBar()->setSingleStep(std::max(1, unit()));
        if (follow) verticalScrollBar()->setValue(verticalScrollBar()->maximum());
        viewport()->update();
    }

    // A zoom into the upper right can leave only keys after every visible query on screen:
    // an all-masked view that looks empty. Then scroll left until the diagonal of the
    // visible rows is in the middle.
    void keepDiagonalVisible() {
        if (rows() == 0) return;
        const QRect area = settledDataArea();
        const QPoint o = origin();
        const int first_q = tokenAtPx(std::max(0, area.top() - o.y()));
        const int last_q =
            std::min(rows() - 1, tokenAtPx(std::max(0, area.bottom() - o.y())) + ds() - 1);
        const int first_k = tokenAtPx(std::max(0, area.left() - o.x()));
        if (first_q > last_q || first_k <= last_q) return;
        const int mid_q = (first_q + last_q) / 2;
        horizontalScrollBar()->setValue(tokenPx(mid_q) - area.width() / 2);
    }

  protected:
    void scrollContentsBy(int, int) override { viewport()->update(); }
    void resizeEvent(QResizeEvent* event) override {
        QAbstractScrollArea::resizeEvent(event);
        updateScrollBars();
        owner_->applyAutoZoom();
    }

    void wheelEvent(QWheelEvent* event) override {
        if (event->modifiers() & Qt::ControlModifier) {
            const int delta = event->angleDelta().y();
            if (delta != 0) {
                // Zoom around the cursor, or the nearest point of the matrix when the cursor
                // is over the labels or the empty space beside a small matrix.
                const QRect content = contentRect().intersected(dataArea());
                QPoint anchor = event->position().toPoint();
                if (!content.isEmpty()) {
                    anchor.setX(std::clamp(anchor.x(), content.left(), content.right()));
                    anchor.setY(std::clamp(anchor.y(), content.top(), content.bottom()));
                }
                owner_->zoomBy(delta > 0 ? 1 : -1, anchor, anchor);
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
                const QRect cell_rect(origin() + QPoint(tokenPx(k), tokenPx(q)),
                                      QSize(unit(), unit()));
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
        const int n_rows = rows();
        const int n_cols = columns();
        const int d = ds();

        if (n_rows == 0) {
            p.setPen(pal.color(QPalette::PlaceholderText));
            p.drawText(viewport()->rect().adjusted(8, 8, -8, -8),
                       Qt::AlignCenter | Qt::TextWordWrap, owner_->placeholderText());
            return;
        }

        // Visible token range: first token of the first visible unit to one past the last.
        const int q0 = std::max(0, tokenAtPx(std::max(0, area.top() - o.y())));
        const int q1 = std::min(n_rows, tokenAtPx(std::max(0, area.bottom() + 1 - o.y())) + d);
        const int k0 = std::max(0, tokenAtPx(std::max(0, area.left() - o.x())));
        const int k1 = std::min(n_cols, tokenAtPx(std::max(0, area.right() + 1 - o.x())) + d);

        p.save();
        p.setClipRect(area);
        drawImage(p, o, q0, q1, k0, k1);
        if (hover_.first >= 0) {
            QPen pen(pal.color(QPalette::Highlight));
            pen.setWidth(2);
            p.setPen(pen);
            p.setBrush(Qt::NoBrush);
            const int u = std::max(unit(), 3);
            p.drawRect(QRect(o + QPoint(tokenPx(hover_.second), tokenPx(hover_.first)), QSize(u, u))
                           .adjusted(0, 0, -1, -1));
        }
        p.restore();

        // Axis labels: every `step`-th one so that they never overlap.
        QFont label_font = font();
        label_font.setPointSizeF(std::max(6.0, label_font.pointSizeF() * 0.85));
        p.setFont(label_font);
        const QFontMetrics fm(label_font);
        const int step = std::max(1, int(std::ceil(double(fm.height()) / pxPerToken())));
        const int left_extent = leftExtent();
        const int top_extent = topExtent();
        const int u = unit();
        const QColor text = pal.color(QPalette::Text);
        const QColor dim = pal.color(QPalette::PlaceholderText);
        const auto& labels = owner_->data_.labels;
        auto label_of = [&](int i) {
            return i < labels.size() ? axis_label(labels[i]) : QString::number(i);
        };

        p.save();
        p.setClipRect(QRect(0, area.top(), area.left(), area.height()));
        for (int q = q0 - q0 % step; q < q1; q += step) {
            const QRect r(kLabelPad, o.y() + tokenPx(q) + u / 2 - fm.height() / 2, left_extent,
                          fm.height());
            p.setPen(q == hover_.first ? pal.color(QPalette::Highlight) : text);
            p.drawText(r, Qt::AlignRight | Qt::AlignVCenter,
                       fm.elidedText(label_of(q), Qt::ElideRight, left_extent));
        }
        p.restore();

        p.save();
        p.setClipRect(QRect(area.left(), 0, area.width(), area.top()));
        for (int k = k0 - k0 % step; k < k1; k += step) {
            // Rotated so that long tokens fit in a column; read bottom-to-top.
            p.save();
            p.translate(o.x() + tokenPx(k) + u / 2 + fm.ascent() / 2 - 1, area.top() - kLabelPad);
            p.rotate(-90);
            p.setPen(k == hover_.second ? pal.color(QPalette::Highlight) : text);
            p.drawText(QRect(0, -fm.ascent(), top_extent, fm.height()),
                       Qt::AlignLeft | Qt::AlignVCenter,
                       fm.elidedText(label_of(k), Qt::ElideRight, top_extent));
            p.restore();
        }
        p.restore();

        // Axis names in the corner.
        p.setPen(dim);
        const QRect corner(kLabelPad, kLabelPad, area.left() - 2 * kLabelPad,
                           area.top() - 2 * kLabelPad);
        p.drawText(corner, Qt::AlignLeft | Qt::AlignTop, tr("key →"));
        p.drawText(corner, Qt::AlignLeft | Qt::AlignBottom, tr("query ↓"));
        p.setPen(pal.color(QPalette::Mid));
        p.drawLine(area.left() - 1, area.top(), area.left() - 1, area.bottom());
        p.drawLine(area.left(), area.top() - 1, area.right(), area.top() - 1);
    }

  private:
    // Draws the visible tokens [q0, q1) x [k0, k1) of the owner's image. The image may have
    // another scale than the screen (a capped render scaled up, or a stale one while a new
    // render runs): both are addressed by token ranges aligned to both scales' blocks, so that
    // every image cell lands exactly on its screen cell.
    void drawImage(QPainter& p, const QPoint& o, int q0, int q1, int k0, int k1) const {
        const QImage& img = owner_->image_;
        if (img.isNull()) return;
        const int d = ds();
        const int ids = owner_->image_ds_;
        const int ic = owner_->image_cell_;
        const int block = std::lcm(d, ids);
        auto down = [block](int t) { return t / block * block; };
        auto up = [block](int t) { return (t + block - 1) / block * block; };
        q0 = down(q0);
        k0 = down(k0);
        q1 = std::min(up(q1), owner_->image_rows_);
        k1 = std::min(up(k1), owner_->image_cols_);
        if (q1 <= q0 || k1 <= k0) return;
        auto image_px = [&](int t, bool end) {
            if (ids > 1) return end ? (t + ids - 1) / ids : t / ids;
            return t * ic;
        };
        auto screen_px = [&](int t, bool end) {
            if (d > 1) return end ? (t + d - 1) / d : t / d;
            return t * cell();
        };
        const QRect source(QPoint(image_px(k0, false), image_px(q0, false)),
                           QPoint(image_px(k1, true) - 1, image_px(q1, true) - 1));
        const QRect target(o + QPoint(screen_px(k0, false), screen_px(q0, false)),
                           QSize(screen_px(k1, true) - screen_px(k0, false),
                                 screen_px(q1, true) - screen_px(q0, false)));
        // Nearest-neighbour scaling: cells are meant to be crisp squares.
        p.setRenderHint(QPainter::SmoothPixmapTransform, false);
        p.drawImage(target, img, source);
    }

    AttentionHeatmap* owner_;
    std::pair<int, int> hover_{-1, -1};
};

AttentionHeatmap::AttentionHeatmap(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->setSpacing(2);

    // One compact row of choosers and zoom buttons above the map; the colour scale, legend,
    // downsampling note and status share one row below it. Minimum widths are set explicitly
    // so that a narrow dock squeezes the choosers instead of refusing to shrink.
    auto* bar = new QHBoxLayout;
    bar->setSpacing(4);
    layer_box_ = new QSpinBox(this);
    layer_box_->setObjectName(QStringLiteral("layerBox"));
    layer_box_->setPrefix(tr("layer "));
    layer_box_->setRange(0, 0);
    layer_box_->setToolTip(tr("Transformer layer (0 = closest to the input)"));
    layer_box_->setMinimumWidth(fontMetrics().horizontalAdvance(QStringLiteral("L 00")) + 28);
    head_box_ = new QComboBox(this);
    head_box_->setObjectName(QStringLiteral("headBox"));
    head_box_->setToolTip(tr("Attention head, or the mean over all heads of the layer"));
    head_box_->addItem(tr("mean of heads"), -1);
    head_box_->setMinimumWidth(fontMetrics().horizontalAdvance(QStringLiteral("head 0")) + 20);
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
    legend_->setMaximumWidth(legend_->sizeHint().width() + 60);

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
    zoom_label_->setObjectName(QStringLiteral("zoomLabel"));
    // Sized to its text ("14 px", "1/3 px"); the stretch on its left keeps "+" in place.
    zoom_label_->setMinimumWidth(fontMetrics().horizontalAdvance(QStringLiteral("48 px")));
    zoom_label_->setAlignment(Qt::AlignCenter);
    zoom_label_->setToolTip(tr("Screen pixels per token"));
    help_button_ = tool(QStringLiteral("?"), tr("What am I looking at?"));
    help_button_->setCheckable(true);
    help_button_->setObjectName(QStringLiteral("helpButton"));
    zoom_in->setObjectName(QStringLiteral("zoomIn"));
    zoom_out->setObjectName(QStringLiteral("zoomOut"));
    fit->setObjectName(QStringLiteral("zoomFit"));

    bar->addWidget(layer_box_);
    bar->addWidget(head_box_);
    bar->addStretch(1);
    bar->addWidget(zoom_out);
    bar->addWidget(zoom_label_);
    bar->addWidget(zoom_in);
    bar->addWidget(fit);
    bar->addWidget(help_button_);
    layout->addLayout(bar);

    view_ = new HeatmapView(this);
    layout->addWidget(view_, 1);

    auto* foot = new QHBoxLayout;
    foot->setSpacing(6);
    scale_note_ = new QLabel(this);
    scale_note_->setObjectName(QStringLiteral("scaleNote"));
    scale_note_->setForegroundRole(QPalette::Highlight);
    scale_note_->hide();
    status_ = new ElidedLabel(this);
    status_->setObjectName(QStringLiteral("status"));
    foot->addWidget(scale_box_);
    foot->addWidget(legend_, 1);
    foot->addWidget(scale_note_);
    foot->addWidget(status_, 2);
    layout->addLayout(foot);

    // The help is a child of the panel, laid over the map: it moves, hides and clips with the
    // panel (a tooltip-style window would float over other docks and outlive a hidden panel).
    // It scrolls when the panel is too short for the whole text.
    overlay_box_ = new QScrollArea(this);
    overlay_box_->setObjectName(QStringLiteral("attentionOverlay"));
    overlay_box_->setWidgetResizable(true);
    overlay_box_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    overlay_box_->setFrameShape(QFrame::Box);
    overlay_box_->setBackgroundRole(QPalette::ToolTipBase);
    overlay_box_->viewport()->setBackgroundRole(QPalette::ToolTipBase);
    overlay_box_->viewport()->setAutoFillBackground(true);
    overlay_ = new QLabel;
    overlay_->setObjectName(QStringLiteral("overlayText"));
    overlay_->setWordWrap(true);
    overlay_->setTextFormat(Qt::RichText);
    overlay_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    overlay_->setAutoFillBackground(true);
    overlay_->setBackgroundRole(QPalette::ToolTipBase);
    overlay_->setForegroundRole(QPalette::ToolTipText);
    overlay_->setMargin(8);
    overlay_box_->setWidget(overlay_);
    overlay_box_->hide();

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
    updateZoomLabels();
}

AttentionHeatmap::~AttentionHeatmap() = default;

QSize AttentionHeatmap::minimumSizeHint() const {
    // Small enough for a dock in a 1280x720 main window; the layout's own minimum (checked by
    // the tests) stays below this.
    return {260, 200};
}
QSize AttentionHeatmap::sizeHint() const {
    return {640, 560};
}

QWidget* AttentionHeatmap::viewport() const {
    return view_->viewport();
}

QRect AttentionHeatmap::cellArea() const {
    return view_->dataArea();
}

QRect AttentionHeatmap::contentRect() const {
    return view_->contentRect();
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

QString AttentionHeatmap::placeholderText() const {
    if (!placeholder_.isEmpty()) return placeholder_;
    return tr(
        "No attention captured yet.\nSend a message with attention capture on to see "
        "which tokens each token looks at.");
}

QString AttentionHeatmap::scaleNote() const {
    if (ds_ > 1) return tr("1 px = %1 tokens").arg(ds_);
    const RenderScale render = renderScale();
    if (render.ds > 1 && !data_.rows.isEmpty()) {
        return tr("%1×%1 tokens per block").arg(render.ds);
    }
    return {};
}

HeatmapRequest AttentionHeatmap::style() const {
    const RenderScale render = renderScale();
    HeatmapRequest s;
    s.cell = render.cell;
    s.tokens_per_pixel = render.ds;
    s.columns = columnCount();
    s.scale = scale_;
    s.masked = maskedColor();
    s.gap = palette().color(QPalette::Base).rgb();
    return s;
}

AttentionHeatmap::RenderScale AttentionHeatmap::renderScaleFor(int display_cell, int display_ds,
                                                               int columns) const {
    columns = std::max(1, columns);
    // Past kMaxImageSide tokens even 1 px per token is too large: pool blocks of tokens.
    const int min_ds = (columns + kMaxImageSide - 1) / kMaxImageSide;
    if (display_ds > 1 || min_ds > 1) return {1, std::max(display_ds, min_ds)};
    return {std::clamp(display_cell, 1, std::max(1, kMaxImageSide / columns)), 1};
}

void AttentionHeatmap::requestRender() {
    HeatmapRequest request = style();
    request.rows = data_.rows;  // implicitly shared: no copy unless one side changes it
    render_columns_ = std::max(request.columns, int(request.rows.size()));
    // Room for the rows of a streaming reply: they are then painted into this image.
    request.capacity_columns =
        roomFor(render_columns_, render_columns_, request.cell, request.tokens_per_pixel);
    request.capacity_rows = roomFor(int(request.rows.size()), int(request.rows.size()),
                                    request.cell, request.tokens_per_pixel);
    pending_ = true;
    renderer_.request(std::move(request));
    updateStatus();
    updateZoomLabels();
}

void AttentionHeatmap::onImageReady(quint64, const QImage& image, int rows, int cell, int ds) {
    image_ = image;
    image_rows_ = rows;
    image_cell_ = cell;
    image_ds_ = ds;
    image_cols_ = image.isNull() ? 0 : render_columns_;
    pending_ = false;
    // Rows appended while the render ran are painted now, on top of the finished image.
    extendImage();
    view_->viewport()->update();
    updateStatus();
    emit imageUpdated();
}

// Room for half as many tokens again as `held` (at least kGrowCells more, at least `needed`),
// up to what the scale holds at most (past that the scale changes and everything is rendered
// again anyway). Growing by kGrowCells alone reallocated, filled and copied the whole image
// (61 MB at 560 tokens) every 64 tokens.
int AttentionHeatmap::roomFor(int needed, int held, int cell, int ds) {
    const int grow = kGrowCells * ds;
    const int most = ds > 1 ? kMaxImageSide * ds : std::max(1, kMaxImageSide / std::max(1, cell));
    const int want = std::max(needed, held + std::max(grow, held / 2));
    return std::max(needed, std::min((want + grow - 1) / grow * grow, most));
}

HeatmapRequest AttentionHeatmap::imageStyle() const {
    HeatmapRequest s = style();
    s.cell = image_cell_;
    s.tokens_per_pixel = image_ds_;
    return s;
}

bool AttentionHeatmap::imageHasRoom() const {
    if (image_.isNull()) return false;
    const HeatmapRequest s = imageStyle();
    return image_.width() >= heatmap_extent(columnCount(), s) &&
           image_.height() >= heatmap_extent(int(data_.rows.size()), s);
}

void AttentionHeatmap::extendImage() {
    const int rows = int(data_.rows.size());
    const int columns = columnCount();
    if (rows == image_rows_ && columns == image_cols_) return;
    const HeatmapRequest s = imageStyle();
    const int ds = image_ds_;
    if (!imageHasRoom()) {
        // Only when rows arrived during a render beyond the room it made (showAppendedRows
        // renders on the pool instead of growing here on the GUI thread).
        const int held_cols = image_.isNull() ? 0 : image_.width() / std::max(1, s.cell) * ds;
        const int held_rows = image_.isNull() ? 0 : image_.height() / std::max(1, s.cell) * ds;
        const int cap_cols = roomFor(columns, held_cols, s.cell, ds);
        const int cap_rows = roomFor(rows, held_rows, s.cell, ds);
        QImage grown(heatmap_extent(cap_cols, s), heatmap_extent(cap_rows, s),
                     QImage::Format_RGB32);
        // The old image's painted part is copied line by line, the rest filled masked: each
        // pixel is written once, and later keys' columns are masked for the rows painted.
        const int keep_w = image_.isNull() ? 0 : heatmap_extent(image_cols_, s);
        const int keep_h = image_.isNull() ? 0 : heatmap_extent(std::min(image_rows_, rows), s);
        fill_masked(grown, s, keep_w, keep_h);
        for (int y = 0; y < keep_h; ++y) {
            std::memcpy(grown.scanLine(y), image_.constScanLine(y), size_t(keep_w) * sizeof(QRgb));
        }
        image_ = std::move(grown);
    }
    if (ds > 1) {
        // Pixel rows whose blocks were complete keep their maxima: the new keys come after
        // all of their queries (masked). The last, partial block row and the new ones are
        // pooled again from the data.
        const int complete = image_rows_ / ds;
        for (int y = complete; y < heatmap_extent(rows, s); ++y) {
            paint_pooled_row(image_, y, data_.rows, s);
        }
    } else {
        for (int q = image_rows_; q < rows; ++q) paint_heatmap_row(image_, q, data_.rows[q], s);
    }
    image_rows_ = rows;
    image_cols_ = columns;
}

QImage AttentionHeatmap::currentImage() const {
    if (image_.isNull() || image_rows_ == 0) return {};
    const HeatmapRequest s = imageStyle();
    return image_.copy(0, 0, heatmap_extent(image_cols_, s), heatmap_extent(image_rows_, s));
}

// Whether `next` is the shown matrix plus rows of later tokens: same layer, head and prompt,
// every shown row and label unchanged. During a reply the worker sends the whole matrix a few
// times a second, and each time it is the last one plus the tokens since.
bool AttentionHeatmap::extendsData(const AttentionData& next) const {
    const qsizetype rows = data_.rows.size();
    if (rows == 0 || next.layer != data_.layer || next.head != data_.head ||
        next.prompt_tokens != data_.prompt_tokens || next.rows.size() < rows ||
        next.labels.size() < std::min(data_.labels.size(), rows))
        return false;
    for (qsizetype q = 0; q < rows; ++q) {
        if (next.rows[q] != data_.rows[q]) return false;
    }
    for (qsizetype q = 0; q < std::min(data_.labels.size(), rows); ++q) {
        if (next.labels[q] != data_.labels[q]) return false;
    }
    return true;
}

void AttentionHeatmap::setData(const AttentionData& data) {
    if (extendsData(data)) {
        // Only the new rows are painted, as appendRow does. A full render per update had the
        // renderer allocate and fill a new image of up to 4096 x 4096 pixels (64 MiB) four
        // times a second while a reply streamed, on cores that the engine's threads need:
        // SmolLM2 decoded about a quarter slower in the app than in the CLI.
        const qsizetype first = std::min(data_.labels.size(), data_.rows.size());
        data_ = data;
        widenLabelExtent(first);
        showAppendedRows();
        return;
    }
    data_ = data;
    recomputeLabelExtent();
    syncControls();
    view_->updateScrollBars();
    applyAutoZoom();
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
    widenLabelExtent(q);
    showAppendedRows();
}

void AttentionHeatmap::widenLabelExtent(qsizetype first) {
    const QFontMetrics fm(font());
    for (qsizetype q = first; q < data_.labels.size(); ++q) {
        const int w = std::min(kMaxLabelExtent, fm.horizontalAdvance(axis_label(data_.labels[q])));
        if (w > label_extent_) label_extent_ = w;
    }
}

void AttentionHeatmap::showAppendedRows() {
    view_->updateScrollBars();
    applyAutoZoom();
    updateOverlay();
    if (pending_) {
        // The running render covers a prefix; onImageReady paints the rest.
        updateStatus();
        return;
    }
    // A new image (another scale, or more rows than this one has room for) is rendered on the
    // pool: allocating and filling up to 64 MiB here stalled the GUI thread for up to 156 ms
    // (test_window_usability, 2000 tokens).
    if (renderScale() != RenderScale{image_cell_, image_ds_} || !imageHasRoom()) {
        requestRender();
        return;
    }
    extendImage();
    view_->viewport()->update();
    updateStatus();
    emit imageUpdated();
}

void AttentionHeatmap::clear(const QString& placeholder) {
    placeholder_ = placeholder;
    setData(AttentionData{data_.layer, data_.head, {}, {}, {}, -1});
}

void AttentionHeatmap::setZoom(int cell, int ds, const QPoint& anchor,
                               std::optional<QPoint> target) {
    ds = std::max(1, ds);
    cell = ds > 1 ? 1 : std::clamp(cell, kZoomSteps.front(), kZoomSteps.back());
    if (cell == cell_ && ds == ds_) return;
    // The matrix point (in tokens, fractional) under the anchor, read before anything moves:
    // new scroll ranges clamp the scroll values, which would shift the origin.
    const QPoint o = view_->origin();
    const double old_ppt = view_->pxPerToken();
    const double tx = double(anchor.x() - o.x()) / old_ppt;
    const double ty = double(anchor.y() - o.y()) / old_ppt;
    const RenderScale old_render = renderScale();
    cell_ = cell;
    ds_ = ds;
    updateZoomLabels();
    view_->updateScrollBars(false);
    // The view's centre with the scroll bars of the new zoom.
    const QPoint to = target.value_or(view_->settledDataArea().center());
    const double ppt = view_->pxPerToken();
    view_->horizontalScrollBar()->setValue(
        int(std::lround(tx * ppt - double(to.x() - view_->leftMargin()))));
    view_->verticalScrollBar()->setValue(
        int(std::lround(ty * ppt - double(to.y() - view_->topMargin()))));
    view_->keepDiagonalVisible();
    // Past the image size cap the same image is only scaled; otherwise re-render crisply.
    if (renderScale() != old_render && !data_.rows.isEmpty()) requestRender();
    view_->viewport()->update();
}

QPoint AttentionHeatmap::zoomAnchor() const {
    // The centre of the visible part of the matrix: the view's centre can lie beside a matrix
    // that does not fill the view (after Fit), often in the masked upper right.
    const QRect area = view_->dataArea();
    const QRect visible = view_->contentRect().intersected(area);
    return visible.isEmpty() ? area.center() : visible.center();
}

void AttentionHeatmap::zoomBy(int direction, const QPoint& anchor, std::optional<QPoint> target) {
    auto_zoom_ = false;
    if (direction > 0) {
        if (ds_ > 1) {
            // Fewer tokens per pixel, down to 1 px per token.
            auto it = std::lower_bound(kDownSteps.begin(), kDownSteps.end(), ds_);
            const int next = it == kDownSteps.begin() ? 1 : *std::prev(it);
            setZoom(1, next, anchor, target);
        } else {
            auto up = std::upper_bound(kZoomSteps.begin(), kZoomSteps.end(), cell_);
            if (up != kZoomSteps.end()) setZoom(*up, 1, anchor, target);
        }
        return;
    }
    if (ds_ == 1 && cell_ > kZoomSteps.front()) {
        auto it = std::lower_bound(kZoomSteps.begin(), kZoomSteps.end(), cell_);
        setZoom(*std::prev(it), 1, anchor, target);
        return;
    }
    // Past 1 px per token: only as far as it takes to show the whole matrix.
    const QSize room =
        view_->contentsRect().size() - QSize(view_->leftMargin(), view_->topMargin());
    if (room.width() <= 0 || room.height() <= 0) return;
    const int fit_ds = std::max({1, (columnCount() + room.width() - 1) / room.width(),
                                 (int(data_.rows.size()) + room.height() - 1) / room.height()});
    if (ds_ >= fit_ds) return;
    auto up = std::upper_bound(kDownSteps.begin(), kDownSteps.end(), ds_);
    const int next = up == kDownSteps.end() ? fit_ds : std::min(*up, fit_ds);
    setZoom(1, next, anchor, target);
}

void AttentionHeatmap::setCellSize(int pixels) {
    auto_zoom_ = false;
    setZoom(pixels, 1, zoomAnchor(), std::nullopt);
}

void AttentionHeatmap::zoomIn() {
    zoomBy(1, zoomAnchor(), std::nullopt);
}

void AttentionHeatmap::zoomOut() {
    zoomBy(-1, zoomAnchor(), std::nullopt);
}

void AttentionHeatmap::zoomToFit() {
    auto_zoom_ = false;
    // The room without scroll bars: after fitting there are none.
    const QSize room =
        view_->contentsRect().size() - QSize(view_->leftMargin(), view_->topMargin());
    if (room.width() <= 0 || room.height() <= 0) return;
    const int columns = std::max(1, columnCount());
    const int rows = std::max(1, int(data_.rows.size()));
    if (columns <= room.width() && rows <= room.height()) {
        int best = kZoomSteps.front();
        for (int step : kZoomSteps) {
            if (columns * step <= room.width() && rows * step <= room.height()) best = step;
        }
        setZoom(best, 1, zoomAnchor(), zoomAnchor());
    } else {
        // Several tokens per pixel, each pixel the strongest weight of its block.
        const int ds = std::max((columns + room.width() - 1) / room.width(),
                                (rows + room.height() - 1) / room.height());
        setZoom(1, ds, zoomAnchor(), zoomAnchor());
    }
    view_->horizontalScrollBar()->setValue(0);
    view_->verticalScrollBar()->setValue(0);
}

void AttentionHeatmap::applyAutoZoom() {
    if (!auto_zoom_ || data_.rows.isEmpty()) return;
    // Decided from the view's size without scroll bars, counting a horizontal bar only where
    // the candidate needs one: the choice must not depend on the bars it makes appear.
    const QSize room =
        view_->contentsRect().size() - QSize(view_->leftMargin(), view_->topMargin());
    const int bar = view_->style()->pixelMetric(QStyle::PM_ScrollBarExtent, nullptr, view_);
    const int rows = int(data_.rows.size());
    const int columns = columnCount();
    const int wanted = std::min(rows, kAutoMinRows);
    int best = kAutoMinCell;
    for (int step : kZoomSteps) {
        if (step < kAutoMinCell || step > kDefaultCell) continue;
        const int height = room.height() - (columns * step > room.width() ? bar : 0);
        if (height / step >= wanted) best = step;
    }
    if (best == cell_ && ds_ == 1) return;
    // Keep the first visible cell in place (and a view following the newest row at the end).
    const bool following =
        view_->verticalScrollBar()->maximum() > 0 &&
        view_->verticalScrollBar()->value() >= view_->verticalScrollBar()->maximum();
    const QPoint corner = view_->dataArea().topLeft();
    setZoom(best, 1, corner, corner);
    if (following) view_->verticalScrollBar()->setValue(view_->verticalScrollBar()->maximum());
}

void AttentionHeatmap::updateZoomLabels() {
    zoom_label_->setText(ds_ > 1 ? tr("1/%1 px").arg(ds_) : tr("%1 px").arg(cell_));
    const QString note = scaleNote();
    scale_note_->setText(note);
    scale_note_->setToolTip(
        tr("Downsampled: each pixel shows the strongest weight of a block of query and key "
           "tokens, so that single strong weights stay visible"));
    scale_note_->setVisible(!note.isEmpty());
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
    return overlay_box_->isVisibleTo(this);
}

void AttentionHeatmap::setOverlayVisible(bool visible) {
    if (help_button_->isChecked() != visible) {
        const QSignalBlocker block(help_button_);
        help_button_->setChecked(visible);
    }
    overlay_box_->setVisible(visible);
    if (visible) {
        placeOverlay();
        overlay_box_->raise();
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
    if (overlay_box_->isVisible()) placeOverlay();
}

void AttentionHeatmap::placeOverlay() {
    // Over the lower right of the map, leaving the toolbar usable to switch it off; as tall
    // as the wrapped text needs, at most the map's height (then it scrolls).
    QRect area = view_->geometry().adjusted(kOverlayMargin, kOverlayMargin, -kOverlayMargin,
                                            -kOverlayMargin);
    area = area.intersected(rect());
    if (area.width() < 80 || area.height() < 60) area = rect();
    const int frame = 2 * overlay_box_->frameWidth();
    const int w = std::min(area.width(), kOverlayMaxWidth);
    int h = overlay_->heightForWidth(w - frame) + frame;
    if (h > area.height()) {
        // Scrolling: the vertical bar takes part of the width, so the text wraps longer.
        const int bar =
            overlay_box_->style()->pixelMetric(QStyle::PM_ScrollBarExtent, nullptr, overlay_box_);
        h = std::min(area.height(), overlay_->heightForWidth(w - frame - bar) + frame);
    }
    overlay_box_->setGeometry(area.right() + 1 - w, area.bottom() + 1 - h, w, h);
}

void AttentionHeatmap::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    // "layer 12" reads better, "L 12" leaves the head chooser room in a narrow dock.
    const QString prefix = width() < 400 ? tr("L ") : tr("layer ");
    if (layer_box_->prefix() != prefix) layer_box_->setPrefix(prefix);
    if (overlay_box_->isVisible()) placeOverlay();
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
    const int u = view_->unit();
    return view_->origin() + QPoint(view_->tokenPx(key) + u / 2, view_->tokenPx(query) + u / 2);
}

std::pair<int, int> AttentionHeatmap::cellAt(const QPoint& viewport_pos) const {
    return view_->cellAt(viewport_pos);
}

QString AttentionHeatmap::toolTipAt(const QPoint& viewport_pos) const {
    const auto [q, k] = view_->cellAt(viewport_pos);
    if (q < 0) return {};
    if (ds_ == 1) return toolTipForCell(q, k);
    // A downsampled pixel shows the largest weight of its block: name that cell.
    int best_q = q;
    int best_k = k;
    float best = -1.0f;
    const int q_end = std::min(int(data_.rows.size()), q + ds_);
    for (int i = q; i < q_end; ++i) {
        const auto& row = data_.rows[i];
        const int k_end = std::min({int(row.size()), i + 1, k + ds_});
        for (int j = k; j < k_end; ++j) {
            if (row[j] > best) {
                best = row[j];
                best_q = i;
                best_k = j;
            }
        }
    }
    return tr("strongest of %1×%1 tokens: ").arg(ds_) + toolTipForCell(best_q, best_k);
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
