#include "head_grid.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QtConcurrent/QtConcurrentRun>
#include <cmath>

#include "export_actions.h"

namespace tokenscope::ui {

namespace {
constexpr int kGap = 6;
constexpr int kTitle = 16;  // the "h3" line above each panel
// A single query row (a decode step) is drawn as a strip at least this tall, so it reads as
// a row of cells rather than a hairline.
constexpr int kMinStripHeight = 14;

// Where a panel's image goes inside its box: the image's aspect kept, nearest-neighbour
// scaled, a one-row strip stretched to a visible height.
QRect image_rect(const QRect& box, const QSize& cells) {
    if (cells.isEmpty()) return {};
    const double sx = double(box.width()) / cells.width();
    const double sy = double(box.height()) / cells.height();
    double s = std::min(sx, sy);
    int w = int(cells.width() * s);
    int h = int(cells.height() * s);
    if (h < kMinStripHeight) h = std::min(box.height(), kMinStripHeight);
    w = std::max(1, w);
    return QRect(box.left(), box.top(), w, h);
}
}  // namespace

HeadGrid::HeadGrid(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setBackgroundRole(QPalette::Base);
    setAutoFillBackground(true);
    placeholder_ = tr("No attention yet: send a message (or Step) to see every head of a layer.");
    installExportMenu(this, [this] {
        ExportSource s;
        s.base_name = QStringLiteral("heads-layer%1").arg(data_.layer);
        s.image = [this] { return renderImage(2.0); };
        if (data_.rows() > 0) {
            const auto e = attentionExport(data_);
            s.svg = [e] { return QString::fromStdString(inspect::attention_grid_svg(e, {})); };
            s.csv = [e] { return QString::fromStdString(inspect::attention_csv(e)); };
            s.json = [e] { return QString::fromStdString(inspect::attention_json(e)); };
        }
        return s;
    });
}

HeadGrid::~HeadGrid() {
    for (auto* w : std::as_const(watchers_)) w->cancel();
}

QSize HeadGrid::sizeHint() const {
    return {360, 260};
}

QSize HeadGrid::minimumSizeHint() const {
    return {120, 80};
}

void HeadGrid::setColorScale(ColorScale scale) {
    if (scale == scale_) return;
    scale_ = scale;
    render();
}

void HeadGrid::setData(const HeadGridData& data) {
    data_ = data;
    if (enlarged_ >= data_.heads.size()) enlarged_ = -1;
    render();
}

void HeadGrid::clear(const QString& placeholder) {
    if (!placeholder.isEmpty()) placeholder_ = placeholder;
    setData(HeadGridData{});
}

void HeadGrid::setEnlargedHead(int head) {
    enlarged_ = (head >= 0 && head < data_.heads.size()) ? head : -1;
    update();
}

void HeadGrid::render() {
    const quint64 generation = ++generation_;
    for (auto* w : std::as_const(watchers_)) w->cancel();
    images_.clear();
    pending_ = data_.rows() > 0;
    update();
    if (!pending_) return;
    // Each head: its rows as a full heatmap from key 0; the rows before first_query are
    // not part of this view, so the image holds only the rows sent.
    const HeadGridData data = data_;
    const ColorScale scale = scale_;
    const QRgb masked = palette().color(QPalette::AlternateBase).rgb();
    auto* watcher = new QFutureWatcher<QVector<QImage>>(this);
    watchers_.append(watcher);
    connect(watcher, &QFutureWatcher<QVector<QImage>>::finished, this, [this, watcher, generation] {
        watchers_.removeOne(watcher);
        watcher->deleteLater();
        if (generation != generation_ || watcher->isCanceled() ||
            watcher->future().resultCount() == 0)
            return;
        images_ = watcher->future().result();
        pending_ = false;
        update();
        emit imagesReady();
    });
    watcher->setFuture(QtConcurrent::run([data, scale, masked] {
        QVector<QImage> out;
        const int keys = data.keys();
        for (const auto& head : data.heads) {
            if (head.isEmpty()) {
                out.push_back({});
                continue;
            }
            QImage image(keys, int(head.size()), QImage::Format_RGB32);
            for (int r = 0; r < head.size(); ++r) {
                auto* line = reinterpret_cast<QRgb*>(image.scanLine(r));
                const int q = data.first_query + r;
                for (int k = 0; k < keys; ++k)
                    line[k] =
                        (k <= q && k < head[r].size()) ? weight_color(head[r][k], scale) : masked;
            }
            out.push_back(image);
        }
        return out;
    }));
}

int HeadGrid::columnsFor(int heads) const {
    if (heads <= 0) return 1;
    // One query row (a decode step): wide strips, about 150 px each.
    if (data_.rows() <= 1) return std::clamp(width() / 150, 1, heads);
    // A block: the column count that gives each panel the largest side in this widget.
    int best = 1;
    double best_side = 0;
    for (int c = 1; c <= heads; ++c) {
        const int r = (heads + c - 1) / c;
        const double w = double(width() - kGap * (c + 1)) / c;
        const double h = double(height() - (kGap + kTitle) * r - kGap) / r;
        const double side = std::min(w, h);
        if (side > best_side) {
            best_side = side;
            best = c;
        }
    }
    return best;
}

int HeadGrid::stripGridHeight(int heads) const {
    const int cols = std::clamp(width() / 150, 1, std::max(1, heads));
    const int rows = (heads + cols - 1) / cols;
    return kGap + rows * (kTitle + kMinStripHeight + kGap);
}

QRect HeadGrid::panelRect(int head) const {
    const int heads = int(data_.heads.size());
    if (head < 0 || head >= heads || enlarged_ >= 0) return {};
    const int cols = columnsFor(heads);
    const int rows = (heads + cols - 1) / cols;
    const int w = (width() - kGap * (cols + 1)) / cols;
    const int h = (height() - kGap - rows * (kGap + kTitle)) / rows;
    const int c = head % cols;
    const int r = head / cols;
    return QRect(kGap + c * (w + kGap), kGap + r * (h + kGap + kTitle) + kTitle, w, h);
}

int HeadGrid::headAt(const QPoint& pos) const {
    if (enlarged_ >= 0) return enlarged_;
    for (int h = 0; h < data_.heads.size(); ++h) {
        QRect r = panelRect(h);
        r.setTop(r.top() - kTitle);
        if (r.contains(pos)) return h;
    }
    return -1;
}

void HeadGrid::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paintTo(p, rect());
}

void HeadGrid::paintTo(QPainter& p, const QRect& area) const {
    p.fillRect(area, palette().color(QPalette::Base));
    p.setPen(palette().color(QPalette::Text));
    if (data_.rows() == 0) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(area.adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap, placeholder_);
        return;
    }
    if (pending_ && images_.isEmpty()) {
        p.drawText(area, Qt::AlignCenter, tr("rendering…"));
        return;
    }
    const QString rows_note =
        data_.rows() == 1 ? tr("1 query row") : tr("%1 query rows").arg(data_.rows());
    if (enlarged_ >= 0 && enlarged_ < images_.size()) {
        const QRect title(area.left() + kGap, area.top() + 2, area.width() - 2 * kGap, kTitle);
        p.drawText(title, Qt::AlignLeft | Qt::AlignVCenter,
                   tr("layer %1 · head %2 · %3 × %4 keys · click to see every head")
                       .arg(data_.layer)
                       .arg(enlarged_)
                       .arg(rows_note)
                       .arg(data_.keys()));
        const QRect box = area.adjusted(kGap, kGap + kTitle, -kGap, -kGap);
        const QImage& img = images_[enlarged_];
        if (!img.isNull()) p.drawImage(image_rect(box, img.size()), img);
        return;
    }
    for (int h = 0; h < images_.size(); ++h) {
        const QRect box = panelRect(h);
        if (box.isEmpty()) continue;
        p.drawText(QRect(box.left(), box.top() - kTitle, box.width(), kTitle),
                   Qt::AlignLeft | Qt::AlignVCenter, tr("h%1").arg(h));
        const QImage& img = images_[h];
        if (!img.isNull()) p.drawImage(image_rect(box, img.size()), img);
    }
}

QImage HeadGrid::renderImage(qreal scale) const {
    QImage image((QSizeF(size()) * scale).toSize(), QImage::Format_RGB32);
    image.fill(palette().color(QPalette::Base));
    QPainter p(&image);
    p.scale(scale, scale);
    paintTo(p, rect());
    return image;
}

void HeadGrid::mousePressEvent(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton) return QWidget::mousePressEvent(event);
    if (enlarged_ >= 0) {
        setEnlargedHead(-1);
        return;
    }
    const int h = headAt(event->pos());
    if (h < 0) return;
    setEnlargedHead(h);
    emit headClicked(h);
}

void HeadGrid::mouseMoveEvent(QMouseEvent* event) {
    const int h = headAt(event->pos());
    if (h < 0 || data_.rows() == 0) {
        QToolTip::hideText();
        return;
    }
    // The strongest key of the newest row: what this head mostly looks at.
    const auto& row = data_.heads[h].back();
    int best = 0;
    for (int k = 1; k < row.size(); ++k)
        if (row[k] > row[best]) best = k;
    const QString key = best < data_.labels.size() ? data_.labels[best] : QString();
    const int q = data_.first_query + data_.rows() - 1;
    const QString query = q < data_.labels.size() ? data_.labels[q] : QString();
    QToolTip::showText(event->globalPosition().toPoint(),
                       tr("head %1: '%2' (%3) looks most at '%4' (%5): %6")
                           .arg(h)
                           .arg(query)
                           .arg(q)
                           .arg(key)
                           .arg(best)
                           .arg(row.isEmpty() ? 0.0 : double(row[best]), 0, 'f', 3),
                       this);
}

}  // namespace tokenscope::ui
