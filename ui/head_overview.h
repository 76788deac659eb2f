#pragma once
// A layer x head map of the current reply's attention so that a student can find the heads
// worth a look: each cell is one head, coloured by its mean row entropy (low = focused on a
// few tokens, high = spread out) or by its mean distance (how many tokens back it looks on
// average: previous-token heads are near 1, heads that read the whole context are far). A click
// on a cell picks that layer and head.
#include <QWidget>

#include "teaching_data.h"

class QComboBox;

namespace tokenscope::ui {

class HeadOverviewMap;

class HeadOverview : public QWidget {
    Q_OBJECT
  public:
    enum class Measure { Entropy, Distance };
    explicit HeadOverview(QWidget* parent = nullptr);

    const HeadOverviewData& data() const { return data_; }
    Measure measure() const { return measure_; }
    void setMeasure(Measure measure);
    // The value shown for a cell, and the cell's rectangle in map() coordinates.
    float value(int layer, int head) const;
    QRect cellRect(int layer, int head) const;
    QWidget* map() const;

  public slots:
    void setData(const tokenscope::ui::HeadOverviewData& data);

  signals:
    void headChosen(int layer, int head);

  private:
    friend class HeadOverviewMap;
    HeadOverviewData data_;
    Measure measure_ = Measure::Entropy;
    QComboBox* measure_box_ = nullptr;
    HeadOverviewMap* map_ = nullptr;
};

}  // namespace tokenscope::ui
