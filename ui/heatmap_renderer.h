#pragma once
// Turns attention rows into a QImage on a worker thread (QtConcurrent), so that a long context
// (thousands of rows, millions of cells) never stalls the GUI thread. The widget shows the last
// finished image and asks for a new one when the data or the zoom changes; every request gets a
// generation number and results of older generations are dropped (and their jobs cancelled).
#include <QColor>
#include <QFutureWatcher>
#include <QImage>
#include <QObject>
#include <QVector>

namespace tokenscope::ui {

// How weights map to the colour map's [0, 1] position. Softmax rows are dominated by a few
// large weights (often the first token, an "attention sink"); sqrt/log spread out the small
// ones so that structure in the rest of the row stays visible.
enum class ColorScale { Linear, Sqrt, Log };

// Weight in [0, 1] -> position in [0, 1] on the colour map; 0 -> 0 and 1 -> 1 for every scale,
// out-of-range and NaN weights are clamped (NaN -> 0).
float scale_weight(float weight, ColorScale scale);

// A perceptually uniform sequential colour map (viridis: dark blue-violet -> green -> yellow),
// interpolated from a table of anchors. t is clamped to [0, 1].
QRgb colormap(float t);
// The colour of a weight: colormap(scale_weight(weight, scale)).
QRgb weight_color(float weight, ColorScale scale);

struct HeatmapRequest {
    QVector<QVector<float>> rows;  // row q: weights over keys 0..q (lower triangular)
    int columns = 0;               // number of key tokens (>= rows.size() normally)
    int cell = 8;                  // pixels per cell in the image
    // Tokens per pixel along each axis: above 1 the image is downsampled (cell must then be 1)
    // and each pixel shows the largest weight of its tokens_per_pixel² block, so that a single
    // strong weight stays visible instead of being averaged away in a long context.
    int tokens_per_pixel = 1;
    ColorScale scale = ColorScale::Linear;
    QRgb masked = qRgb(230, 230, 230);  // cells above the diagonal (and missing weights)
    QRgb gap = qRgb(255, 255, 255);     // 1 px separator between cells when cells are large
    // Tokens the image has room for along each axis (0: exactly columns / rows). Room past the
    // data is masked, so rows appended later are painted into it without a new image.
    int capacity_columns = 0;
    int capacity_rows = 0;
};

// Pixels per cell at or above which a 1 px gap separates cells (smaller cells would lose
// too much of their area to the grid).
inline constexpr int kGapMinCell = 6;

// Image pixels that n tokens take along one axis: n*cell, or ceil(n / tokens_per_pixel) when
// downsampled.
int heatmap_extent(int tokens, const HeatmapRequest& style);

// The synchronous renderer the worker runs; also used directly by tests and for incremental
// rows. Image size: heatmap_extent(columns) x heatmap_extent(rows), Format_RGB32.
QImage render_heatmap(const HeatmapRequest& request);
// Paints row `row` of `image` (which must be large enough) from `weights`; cells with
// k > row or k >= weights.size() get the masked colour.
void paint_heatmap_row(QImage& image, int row, const QVector<float>& weights,
                       const HeatmapRequest& style);
// Downsampled rendering: paints pixel row `pixel_row` of `image` (which must be large enough)
// with, per pixel column, the largest weight among the queries and keys of its block; a block
// whose cells are all masked or missing gets the masked colour. style.tokens_per_pixel is the
// block side; style.cell is ignored (1).
void paint_pooled_row(QImage& image, int pixel_row, const QVector<QVector<float>>& rows,
                      const HeatmapRequest& style);
// Paints every cell of the image as masked (with the gaps of style.cell; 1 px cells when
// downsampled), except pixels [0, keep_width) x [0, keep_height), which the caller paints or
// copies. For room that rows streamed in later are painted into: the cells right of the
// painted columns then already show that no earlier query may attend to a new key.
void fill_masked(QImage& image, const HeatmapRequest& style, int keep_width = 0,
                 int keep_height = 0);

class HeatmapRenderer : public QObject {
    Q_OBJECT
  public:
    explicit HeatmapRenderer(QObject* parent = nullptr);
    ~HeatmapRenderer() override;

    // Starts rendering on the global thread pool; cancels older requests still running.
    // Returns the request's generation.
    quint64 request(HeatmapRequest request);
    // Makes every request so far stale (e.g. the data was replaced) without starting a new one.
    quint64 invalidate() { return ++generation_; }
    quint64 generation() const { return generation_; }
    bool busy() const { return !watchers_.isEmpty(); }

  signals:
    // Only for the newest generation; `rows` is how many query rows (tokens) the image holds,
    // `cell` its pixels per cell and `tokens_per_pixel` its downsampling (1: none).
    void imageReady(quint64 generation, const QImage& image, int rows, int cell,
                    int tokens_per_pixel);

  private:
    quint64 generation_ = 0;
    QList<QFutureWatcher<QImage>*> watchers_;
};

}  // namespace tokenscope::ui
