#include "heatmap_renderer.h"

#include <QPromise>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

namespace tokenscope::ui {

namespace {

// viridis at t = 0, 1/9, ..., 1 (matplotlib's table sampled at ten points). Linear RGB
// interpolation between these anchors stays close to the original perceptual ramp.
constexpr std::array<QRgb, 10> kViridis = {
    0x440154, 0x482878, 0x3E4A89, 0x31688E, 0x26828E,
    0x1F9E89, 0x35B779, 0x6DCD59, 0xB4DE2C, 0xFDE725,
};

// Log scale: log(1 + a w) / log(1 + a). a = 1000 makes a weight of 0.001 land near 10% of
// the map, so faint attention is visible without flattening the strong weights.
constexpr float kLogGain = 1000.0f;

}  // namespace

float scale_weight(float weight, ColorScale scale) {
    if (!(weight > 0.0f)) return 0.0f;  // also NaN
    weight = std::min(weight, 1.0f);
    switch (scale) {
        case ColorScale::Linear:
            return weight;
        case ColorScale::Sqrt:
            return std::sqrt(weight);
        case ColorScale::Log:
            return std::log1p(kLogGain * weight) / std::log1p(kLogGain);
    }
    return weight;
}

QRgb colormap(float t) {
    if (!(t > 0.0f)) t = 0.0f;
    t = std::min(t, 1.0f);
    const float x = t * float(kViridis.size() - 1);
    const int i = std::min(int(x), int(kViridis.size()) - 2);
    const float f = x - float(i);
    const QRgb a = kViridis[i];
    const QRgb b = kViridis[i + 1];
    auto mix = [f](int u, int v) { return int(std::lround(float(u) + (float(v) - float(u)) * f)); };
    return qRgb(mix(qRed(a), qRed(b)), mix(qGreen(a), qGreen(b)), mix(qBlue(a), qBlue(b)));
}

QRgb weight_color(float weight, ColorScale scale) {
    return colormap(scale_weight(weight, scale));
}

void paint_heatmap_row(QImage& image, int row, const QVector<float>& weights,
                       const HeatmapRequest& style) {
    const int cell = std::max(1, style.cell);
    const int width = image.width();
    const int y0 = row * cell;
    if (y0 >= image.height()) return;
    const bool gaps = cell >= kGapMinCell;
    const int columns = width / cell;
    // Build one scanline, then copy it to the other lines of the cell.
    auto* line = reinterpret_cast<QRgb*>(image.scanLine(y0));
    for (int k = 0; k < columns; ++k) {
        QRgb color = style.masked;
        if (k <= row && k < weights.size()) color = weight_color(weights[k], style.scale);
        QRgb* px = line + k * cell;
        std::fill(px, px + cell, color);
        if (gaps) px[cell - 1] = style.gap;
    }
    std::fill(line + columns * cell, line + width, style.gap);
    const int y_end = std::min(image.height(), y0 + cell);
    for (int y = y0 + 1; y < y_end; ++y) {
        auto* dst = reinterpret_cast<QRgb*>(image.scanLine(y));
        if (gaps && y == y0 + cell - 1) {
            std::fill(dst, dst + width, style.gap);
        } else {
            std::memcpy(dst, line, size_t(width) * sizeof(QRgb));
        }
    }
}

void fill_masked(QImage& image, const HeatmapRequest& style, int keep_width, int keep_height) {
    const int cell = style.tokens_per_pixel > 1 ? 1 : std::max(1, style.cell);
    const bool gaps = cell >= kGapMinCell;
    const int width = image.width();
    if (width == 0) return;
    // One line of masked cells, copied to every line that is not a gap line.
    std::vector<QRgb> line(size_t(width), style.masked);
    if (gaps) {
        for (int x = cell - 1; x < width; x += cell) line[size_t(x)] = style.gap;
    }
    for (int y = 0; y < image.height(); ++y) {
        const int x0 = y < keep_height ? std::min(keep_width, width) : 0;
        auto* dst = reinterpret_cast<QRgb*>(image.scanLine(y));
        if (gaps && y % cell == cell - 1) {
            std::fill(dst + x0, dst + width, style.gap);
        } else {
            std::memcpy(dst + x0, line.data() + x0, size_t(width - x0) * sizeof(QRgb));
        }
    }
}

void paint_pooled_row(QImage& image, int pixel_row, const QVector<QVector<float>>& rows,
                      const HeatmapRequest& style) {
    const int ds = std::max(1, style.tokens_per_pixel);
    if (pixel_row < 0 || pixel_row >= image.height()) return;
    const int width = image.width();
    // Largest weight per pixel column; -1 marks "no unmasked cell in this block yet".
    std::vector<float> peak(size_t(width), -1.0f);
    const int q_end = std::min(int(rows.size()), (pixel_row + 1) * ds);
    for (int q = pixel_row * ds; q < q_end; ++q) {
        const QVector<float>& row = rows[q];
        const int k_end = std::min({int(row.size()), q + 1, width * ds});
        const float* w = row.constData();
        for (int k = 0; k < k_end; ++k) {
            // NaN and negative weights count as 0 (as in scale_weight) but still unmask.
            const float v = w[k] > 0.0f ? w[k] : 0.0f;
            float& p = peak[size_t(k / ds)];
            if (v > p) p = v;
        }
    }
    auto* line = reinterpret_cast<QRgb*>(image.scanLine(pixel_row));
    for (int x = 0; x < width; ++x) {
        const float p = peak[size_t(x)];
        line[x] = p < 0.0f ? style.masked : weight_color(p, style.scale);
    }
}

int heatmap_extent(int tokens, const HeatmapRequest& style) {
    const int ds = std::max(1, style.tokens_per_pixel);
    if (ds > 1) return (tokens + ds - 1) / ds;
    return tokens * std::max(1, style.cell);
}

namespace {

// The one render loop of the synchronous and the worker path; returns a null image when
// `cancelled` says so (a newer request superseded this one).
template <typename Cancelled>
QImage render_rows(const HeatmapRequest& request, Cancelled cancelled) {
    const int rows = int(request.rows.size());
    const int columns = std::max(request.columns, rows);
    if (rows == 0 || columns == 0) return {};
    QImage image(heatmap_extent(std::max(columns, request.capacity_columns), request),
                 heatmap_extent(std::max(rows, request.capacity_rows), request),
                 QImage::Format_RGB32);
    // The painted rows cover the whole width (masked past their keys); the room below them
    // starts out masked.
    const int painted = heatmap_extent(rows, request);
    fill_masked(image, request, image.width(), painted);
    if (request.tokens_per_pixel > 1) {
        for (int y = 0; y < painted; ++y) {
            if (cancelled()) return {};
            paint_pooled_row(image, y, request.rows, request);
        }
    } else {
        for (int q = 0; q < rows; ++q) {
            if (cancelled()) return {};
            paint_heatmap_row(image, q, request.rows[q], request);
        }
    }
    return image;
}

}  // namespace

QImage render_heatmap(const HeatmapRequest& request) {
    return render_rows(request, [] { return false; });
}

HeatmapRenderer::HeatmapRenderer(QObject* parent) : QObject(parent) {}

HeatmapRenderer::~HeatmapRenderer() {
    // The jobs own copies of their data (implicitly shared vectors), so they can finish on
    // the pool after this object is gone; cancelling just saves their remaining work.
    for (auto* watcher : std::as_const(watchers_)) watcher->cancel();
}

quint64 HeatmapRenderer::request(HeatmapRequest request) {
    const quint64 generation = ++generation_;
    for (auto* watcher : std::as_const(watchers_)) watcher->cancel();

    const int rows = int(request.rows.size());
    const int ds = std::max(1, request.tokens_per_pixel);
    // A downsampled image has one pixel per block: the cell is 1 px by definition.
    const int cell = ds > 1 ? 1 : std::max(1, request.cell);
    request.cell = cell;
    request.tokens_per_pixel = ds;
    auto* watcher = new QFutureWatcher<QImage>(this);
    watchers_.append(watcher);
    connect(watcher, &QFutureWatcher<QImage>::finished, this,
            [this, watcher, generation, rows, cell, ds] {
                watchers_.removeOne(watcher);
                watcher->deleteLater();
                if (generation != generation_ || watcher->isCanceled()) return;
                const auto future = watcher->future();
                if (future.resultCount() == 0) return;
                emit imageReady(generation, future.result(), rows, cell, ds);
            });
    watcher->setFuture(QtConcurrent::run([req = std::move(request)](QPromise<QImage>& promise) {
        QImage image = render_rows(req, [&promise] { return promise.isCanceled(); });
        // A cancelled job adds no result: the watcher's handler drops it.
        if (promise.isCanceled()) return;
        promise.addResult(std::move(image));
    }));
    return generation;
}

}  // namespace tokenscope::ui
