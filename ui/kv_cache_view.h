#pragma once
// The paged KV cache: how full it is (tokens, bytes, blocks), which sequence owns each block
// (one cell per block, shared prefix blocks marked), and where its size comes from: the
// bytes-per-token formula with this model's numbers, and F16 vs Q8 for the same model.
#include <QWidget>

#include "panel_data.h"

class QLabel;

namespace tokenscope::ui {

// One cell per block, wrapped to the width; height follows from the width.
class KvBlockMap : public QWidget {
    Q_OBJECT
  public:
    explicit KvBlockMap(QWidget* parent = nullptr);

    void setData(const KvBlockMapData& data);
    int blockCount() const { return int(data_.block_owner.size()); }
    // The cell of block `index` in this widget's coordinates.
    QRect blockRect(int index) const;
    // -1 outside every block.
    int blockAt(const QPoint& pos) const;
    QString toolTipForBlock(int index) const;

    // A stable, distinct colour per owner id (golden-angle hue steps), the same in every run
    // so that a conversation keeps its colour while it grows.
    static QColor ownerColor(qint64 owner);
    // Free blocks: a neutral grey between background and text (palette-derived, so it is
    // visible in light and dark themes).
    QColor freeColor() const { return freeColorFor(palette()); }
    static QColor freeColorFor(const QPalette& palette);

    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

  protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

  private:
    int columnsFor(int width) const;

    KvBlockMapData data_;
};

class KvCacheView : public QWidget {
    Q_OBJECT
  public:
    explicit KvCacheView(QWidget* parent = nullptr);

    const KvBlockMapData& data() const { return data_; }
    KvBlockMap* blockMap() const { return map_; }
    // Tokens, bytes and blocks in use, as shown under the gauge.
    QString occupancyText() const;
    // "2 × 18 layers × 1 kv heads × 256 head dim × 2 B (f16) = 18 432 B per token; …"
    QString formulaText() const;
    // F16 vs Q8 for this model.
    QString comparisonText() const;
    // "Last write: 1 token (position 41) → block 3, slot 9 of 16 · +18 432 B"; empty when the
    // data names none.
    QString lastWriteText() const;
    // Fraction of the token capacity in use, [0, 1].
    double occupancy() const;

    QSize minimumSizeHint() const override;

  public slots:
    void setData(const tokenscope::ui::KvBlockMapData& data);
    // Back to the empty state: no blocks, empty gauge, "Load a model…" in place of the formula.
    void clear();

  protected:
    void changeEvent(QEvent* event) override;

  private:
    void updateLegend();

    KvBlockMapData data_;
    class OccupancyGauge* gauge_ = nullptr;
    QLabel* occupancy_ = nullptr;
    KvBlockMap* map_ = nullptr;
    QLabel* legend_ = nullptr;
    QLabel* last_write_ = nullptr;
    QLabel* formula_ = nullptr;
    QLabel* comparison_ = nullptr;
};

}  // namespace tokenscope::ui
