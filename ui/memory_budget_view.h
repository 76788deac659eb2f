#pragma once
// Where the memory goes: weights + KV cache + activations as a stacked bar against the RAM
// that is available (and, with a GPU backend, against the device's memory), with numbers.
// Sizes are in binary units (GiB, MiB) and "available RAM" is the quantity and the name that
// `tokenscope-cli inspect` prints, formatted by the same function (util/byte_format.h).
#include <QVector>
#include <QWidget>

#include "panel_data.h"

class QLabel;

namespace tokenscope::ui {

// A horizontal bar of consecutive segments against a capacity; when the segments add up to
// more than the capacity the bar scales to the sum and marks the capacity with a red line.
class StackedBar : public QWidget {
    Q_OBJECT
  public:
    explicit StackedBar(QWidget* parent = nullptr);

    void setSegments(const QVector<quint64>& values, const QVector<QColor>& colors,
                     quint64 capacity);
    // The track the segments are drawn in (widget coordinates).
    QRect trackRect() const;
    // Segment i's pixel extent inside trackRect(); non-empty segments get at least 2 px so
    // that a small KV cache next to large weights is still visible.
    QRect segmentRect(int index) const;
    int segmentCount() const { return int(values_.size()); }

    QSize sizeHint() const override { return {320, 22}; }
    QSize minimumSizeHint() const override { return {120, 22}; }

  protected:
    void paintEvent(QPaintEvent* event) override;

  private:
    QVector<quint64> values_;
    QVector<QColor> colors_;
    quint64 capacity_ = 0;
};

class MemoryBudgetView : public QWidget {
    Q_OBJECT
  public:
    enum Segment { Weights = 0, KvCache = 1, Activations = 2, OtherGpu = 3 };

    explicit MemoryBudgetView(QWidget* parent = nullptr);

    const MemoryBudgetData& data() const { return data_; }
    // Saturated mid-tone colours, legible against light and dark backgrounds.
    static QColor segmentColor(Segment segment);
    StackedBar* ramBar() const { return ram_bar_; }
    StackedBar* gpuBar() const { return gpu_bar_; }
    bool gpuVisible() const;
    QString ramText() const;
    QString gpuText() const;
    // The RAM bar's capacity: what the model can use (see ramCapacity() in the .cpp).
    quint64 ramCapacity() const;

    QSize minimumSizeHint() const override;

  public slots:
    void setData(const tokenscope::ui::MemoryBudgetData& data);
    // Back to the empty state ("No model loaded.", empty bar, no GPU section).
    void clear();

  private:
    bool hasData() const;

    MemoryBudgetData data_;
    StackedBar* ram_bar_ = nullptr;
    QLabel* ram_label_ = nullptr;
    QLabel* ram_legend_ = nullptr;
    QWidget* gpu_box_ = nullptr;
    StackedBar* gpu_bar_ = nullptr;
    QLabel* gpu_label_ = nullptr;
};

}  // namespace tokenscope::ui
