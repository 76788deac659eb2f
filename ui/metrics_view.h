#pragma once
// Speed of the last turn: time to first token, prefill and decode throughput, per-token
// latency (sparkline), effective memory bandwidth and how much of the prompt came from the
// KV cache instead of being recomputed. When only a few prompt tokens were computed (most came
// from the cache, e.g. after Regenerate) the prefill tile shows that count, not a rate.
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
    // The tooltip of a tile's value (same keys).
    QString valueToolTip(const QString& key) const;
    Sparkline* sparkline() const { return sparkline_; }

    QSize minimumSizeHint() const override;

  public slots:
    void setData(const tokenscope::ui::MetricsData& data);
    // Every tile back to its empty state ("—", no sparkline), e.g. after a conversation switch.
    void clear();

  private:
    static QString prefillRateTip();
    QLabel* addTile(const QString& key, const QString& caption, const QString& tip, int row,
                    int column);

    MetricsData data_;
    QHash<QString, QLabel*> values_;
    QLabel* latency_caption_ = nullptr;
    Sparkline* sparkline_ = nullptr;
    QGridLayout* grid_ = nullptr;
};

}  // namespace tokenscope::ui
