#pragma once
// Speed of the last turn: time to first token, prefill and decode throughput, per-token
// latency (sparkline), effective memory bandwidth and how much of the prompt came from the
// KV cache instead of being recomputed.
#include <QHash>
#include <QWidget>

#include "panel_data.h"

class QGridLayout;
class QLabel;

namespace tokenscope::ui {

class Sparkline;

class MetricsView : public QWidget {
    Q_OBJECT
  public:
    explicit MetricsView(QWidget* parent = nullptr);

    const MetricsData& data() const { return data_; }
    // The shown value of a tile: "ttft", "prefill", "decode", "bandwidth", "prompt", "reused";
    // "latency" is the caption under the sparkline.
    QString valueText(const QString& key) const;
    Sparkline* sparkline() const { return sparkline_; }

    QSize minimumSizeHint() const override;

  public slots:
    void setData(const tokenscope::ui::MetricsData& data);

  private:
    QLabel* addTile(const QString& key, const QString& caption, const QString& tip, int row,
                    int column);

    MetricsData data_;
    QHash<QString, QLabel*> values_;
    QLabel* latency_caption_ = nullptr;
    Sparkline* sparkline_ = nullptr;
    QGridLayout* grid_ = nullptr;
};

}  // namespace tokenscope::ui
