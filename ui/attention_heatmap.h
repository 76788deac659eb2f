#pragma once
// The attention view: query tokens (rows) x key tokens (columns) for one layer and head (or the
// mean over heads), as a heatmap rendered off the GUI thread by HeatmapRenderer. The widget
// only displays the AttentionData it is given; choosing another layer/head emits
// selectionChanged so that the owner can fetch that data.
#include <QImage>
#include <QWidget>

#include "heatmap_renderer.h"
#include "panel_data.h"

class QComboBox;
class QLabel;
class QSpinBox;
class QToolButton;

namespace tokenscope::ui {

class HeatmapView;
class ColorLegend;

class AttentionHeatmap : public QWidget {
    Q_OBJECT
  public:
    explicit AttentionHeatmap(QWidget* parent = nullptr);
    ~AttentionHeatmap() override;

    // The model's shape fills the layer/head choosers and the overlay's cost numbers.
    void setModelShape(int layers, int heads);

    const AttentionData& data() const { return data_; }
    int cellSize() const { return cell_; }
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
    // True while a render for the current data/zoom is running.
    bool renderPending() const { return pending_; }

    // The view's scrolled, painted area; cellCenter/toolTipAt are in its coordinates.
    QWidget* viewport() const;
    QPoint cellCenter(int query, int key) const;
    QString toolTipAt(const QPoint& viewport_pos) const;
    // "query 'cat' (12) → key 'the' (3): 0.412"; empty outside the matrix.
    QString toolTipForCell(int query, int key) const;
    // The teaching overlay's text (HTML) for the current context length.
    QString overlayText() const;
    // The colour of cells above the diagonal, from the palette.
    QRgb maskedColor() const;

    QSize minimumSizeHint() const override;
    QSize sizeHint() const override;

  public slots:
    void setData(const tokenscope::ui::AttentionData& data);
    // One generated token: its attention row (keys 0..q) and its label. Only the new row and
    // the new key column are painted; the rest of the image is reused.
    void appendRow(const QVector<float>& weights, const QString& label);
    void clear();
    void setCellSize(int pixels);
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

    HeatmapRequest style() const;
    int renderCellFor(int display_cell, int columns) const;
    void requestRender();
    void onImageReady(quint64 generation, const QImage& image, int rows, int cell);
    void extendImage();
    void syncControls();
    void updateStatus();
    void updateOverlay();
    void placeOverlay();
    void emitSelection();
    void recomputeLabelExtent();

    AttentionData data_;
    int model_layers_ = 0;
    int model_heads_ = 0;
    int cell_ = 14;
    ColorScale scale_ = ColorScale::Sqrt;

    HeatmapRenderer renderer_;
    QImage image_;  // may be larger than the covered area (room for appended rows)
    int image_rows_ = 0;
    int image_cols_ = 0;
    int image_cell_ = 1;
    bool pending_ = false;
    int label_extent_ = 0;  // widest axis label in pixels

    HeatmapView* view_ = nullptr;
    ColorLegend* legend_ = nullptr;
    QSpinBox* layer_box_ = nullptr;
    QComboBox* head_box_ = nullptr;
    QComboBox* scale_box_ = nullptr;
    QToolButton* help_button_ = nullptr;
    QLabel* zoom_label_ = nullptr;
    QLabel* status_ = nullptr;
    QLabel* overlay_ = nullptr;
};

}  // namespace tokenscope::ui
