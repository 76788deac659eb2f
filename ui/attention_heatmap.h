#pragma once
// The attention view: query tokens (rows) x key tokens (columns) for one layer and head (or the
// mean over heads), as a heatmap rendered off the GUI thread by HeatmapRenderer. The widget
// only displays the AttentionData it is given; choosing another layer/head emits
// selectionChanged so that the owner can fetch that data.
//
// Zoom is pixels per token (cellSize(), 1..48) or, for contexts longer than the view, tokens
// per pixel (tokensPerPixel() > 1, cellSize() 1): the image is then downsampled by max-pooling
// and a note ("1 px = 3 tokens") says so. Until the user zooms, the cell size adapts to the
// panel so that a small dock still shows a useful number of query rows.
#include <QImage>
#include <QWidget>
#include <optional>
#include <utility>

#include "heatmap_renderer.h"
#include "panel_data.h"

class QComboBox;
class QLabel;
class QScrollArea;
class QSpinBox;
class QToolButton;

namespace tokenscope::ui {

class HeatmapView;
class ColorLegend;
class ElidedLabel;

class AttentionHeatmap : public QWidget {
    Q_OBJECT
  public:
    explicit AttentionHeatmap(QWidget* parent = nullptr);
    ~AttentionHeatmap() override;

    // The model's shape fills the layer/head choosers and the overlay's cost numbers.
    void setModelShape(int layers, int heads);

    const AttentionData& data() const { return data_; }
    // Pixels per token on screen (1 while downsampled).
    int cellSize() const { return cell_; }
    // Tokens per screen pixel along each axis: 1 normally, above 1 after zooming out (or Fit)
    // past 1 px per token.
    int tokensPerPixel() const { return ds_; }
    ColorScale colorScale() const { return scale_; }
    bool overlayVisible() const;
    // Cells per side of the key axis: max(labels, rows).
    int columnCount() const;

    // The last finished image, cropped to the rows/columns it covers (null before the first).
    QImage currentImage() const;
    int imageRows() const { return image_rows_; }
    int imageColumns() const { return image_cols_; }
    // Pixels per cell in currentImage() (may be below cellSize() for very long contexts).
    int imageCellSize() const { return image_cell_; }
    // Tokens per pixel of currentImage() (1 unless downsampled: each pixel is then the largest
    // weight of its block).
    int imageTokensPerPixel() const { return image_ds_; }
    // True while a render for the current data/zoom is running.
    bool renderPending() const { return pending_; }

    // The view's scrolled, painted area; cellCenter/toolTipAt are in its coordinates.
    QWidget* viewport() const;
    // The part of viewport() in which cells are painted (the rest holds the axis labels).
    QRect cellArea() const;
    // The matrix as laid out on screen (may extend past cellArea() when scrolled/zoomed).
    QRect contentRect() const;
    QPoint cellCenter(int query, int key) const;
    // {query, key} of the cell under a viewport position ({-1, -1} outside the matrix). While
    // downsampled this is the first token of the pixel's block.
    std::pair<int, int> cellAt(const QPoint& viewport_pos) const;
    QString toolTipAt(const QPoint& viewport_pos) const;
    // "query 'cat' (12) → key 'the' (3): 0.412"; empty outside the matrix.
    QString toolTipForCell(int query, int key) const;
    // The teaching overlay's text (HTML) for the current context length.
    QString overlayText() const;
    // The colour of cells above the diagonal, from the palette.
    QRgb maskedColor() const;
    // The visible downsampling note ("1 px = 3 tokens …"); empty when every token has at
    // least one pixel.
    QString scaleNote() const;
    // The text shown in place of the matrix while there are no rows.
    QString placeholderText() const;
    // The teaching overlay: a child of this panel (never a separate window) that scrolls when
    // its text is longer than the panel is tall.
    QScrollArea* overlayWidget() const { return overlay_box_; }

    QSize minimumSizeHint() const override;
    QSize sizeHint() const override;

  public slots:
    void setData(const tokenscope::ui::AttentionData& data);
    // One generated token: its attention row (keys 0..q) and its label. Only the new row and
    // the new key column are painted; the rest of the image is reused.
    void appendRow(const QVector<float>& weights, const QString& label);
    // Drops all rows. `placeholder` replaces the hint drawn in the empty matrix (e.g. "No
    // attention captured for this conversation yet" after switching conversations); an empty
    // one restores the default hint. The placeholder stays until the next clear().
    void clear(const QString& placeholder = {});
    // An explicit zoom: ends the automatic cell size and downsampling.
    void setCellSize(int pixels);
    // One step in or out, keeping the cell at the centre of the visible matrix in the centre
    // of the view (Ctrl+wheel keeps the cell under the cursor instead).
    void zoomIn();
    void zoomOut();
    void zoomToFit();
    void setColorScale(tokenscope::ui::ColorScale scale);
    void setOverlayVisible(bool visible);

  signals:
    // The user picked another layer or head (-1 = mean over heads).
    void selectionChanged(int layer, int head);
    // A new image (full render or incremental row) is on screen.
    void imageUpdated();

  protected:
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

  private:
    friend class HeatmapView;

    // How the image is rendered: pixels per cell or tokens per pixel (one of them is 1).
    struct RenderScale {
        int cell = 1;
        int ds = 1;
        bool operator==(const RenderScale&) const = default;
    };

    HeatmapRequest style() const;
    RenderScale renderScaleFor(int display_cell, int display_ds, int columns) const;
    RenderScale renderScale() const { return renderScaleFor(cell_, ds_, columnCount()); }
    // Sets the zoom and scrolls so that the matrix point under `anchor` (viewport
    // coordinates) ends up under `target` (as far as the scroll range allows): the same point
    // for Ctrl+wheel (the cell under the cursor stays), the view's centre (nullopt) for the
    // buttons.
    void setZoom(int cell, int ds, const QPoint& anchor, std::optional<QPoint> target);
    // What zoomIn/zoomOut zoom around: the centre of the visible part of the matrix (the
    // view's centre unless the matrix is smaller than the view, as after Fit).
    QPoint zoomAnchor() const;
    // One zoom step in (direction > 0) or out; out stops once the whole matrix fits.
    void zoomBy(int direction, const QPoint& anchor, std::optional<QPoint> target);
    // The cell size for a panel the user has not zoomed yet; applied on resize and new data.
    void applyAutoZoom();
    void requestRender();
    void onImageReady(quint64 generation, const QImage& image, int rows, int cell, int ds);
    void extendImage();
    void syncControls();
    void updateStatus();
    void updateZoomLabels();
    void updateOverlay();
    void placeOverlay();
    void emitSelection();
    void recomputeLabelExtent();
    // The label extent grown by labels [first, end) (rows were appended).
    void widenLabelExtent(qsizetype first);
    // After rows were appended to data_: scroll range, zoom, overlay, and the image extended
    // by the new rows (or rendered again when the scale changed).
    void showAppendedRows();
    bool extendsData(const AttentionData& next) const;
    // Tokens of room for `needed` along one axis when `held` fit before (cell, ds: the scale).
    static int roomFor(int needed, int held, int cell, int ds);
    // style() at the scale the current image was rendered with (image_cell_, image_ds_).
    HeatmapRequest imageStyle() const;
    // Whether the image has room for every row and column of data_ at its scale.
    bool imageHasRoom() const;

    AttentionData data_;
    int model_layers_ = 0;
    int model_heads_ = 0;
    int cell_ = 14;
    int ds_ = 1;
    bool auto_zoom_ = true;  // until the user (or the owner) picks a zoom
    ColorScale scale_ = ColorScale::Sqrt;
    QString placeholder_;

    HeatmapRenderer renderer_;
    QImage image_;  // may be larger than the covered area (room for appended rows)
    int image_rows_ = 0;
    int image_cols_ = 0;
    int image_cell_ = 1;
    int image_ds_ = 1;
    int render_columns_ = 0;  // columns of the newest render request
    bool pending_ = false;
    int label_extent_ = 0;  // widest axis label in pixels

    HeatmapView* view_ = nullptr;
    ColorLegend* legend_ = nullptr;
    QSpinBox* layer_box_ = nullptr;
    QComboBox* head_box_ = nullptr;
    QComboBox* scale_box_ = nullptr;
    QToolButton* help_button_ = nullptr;
    QLabel* zoom_label_ = nullptr;
    QLabel* scale_note_ = nullptr;
    ElidedLabel* status_ = nullptr;
    QScrollArea* overlay_box_ = nullptr;
    QLabel* overlay_ = nullptr;
};

}  // namespace tokenscope::ui
