#pragma once
// Speed of the last turn: time to first token, prefill and decode throughput, per-token
// latency (sparkline), effective memory bandwidth and how much of the prompt came from the
// KV cache instead of being recomputed. With speculative decoding a third row shows the
// acceptance rate, plain decode speed and the speedup (the Decode tile is then the effective
// rate), and a "Why is this free?" button explains it with this model's numbers. When only a few prompt tokens were computed (most came
// from the cache, e.g. after Regenerate) the prefill tile shows that count, not a rate.
#include <QHash>
#include <QWidget>

#include "panel_data.h"

class QGridLayout;
class QLabel;
class QToolButton;

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
    // "acceptance", "plain", "speedup": the speculation row (hidden while not speculating).
    bool speculationRowVisible() const;
    QToolButton* whyFreeButton() const { return why_free_; }
    // The popup the button shows (null until first shown).
    QLabel* whyFreePopup() const { return why_free_popup_; }

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
    void showWhyFree();

    QHash<QString, QLabel*> values_;
    QHash<QString, QLabel*> captions_;
    QToolButton* why_free_ = nullptr;
    QLabel* why_free_popup_ = nullptr;
    QLabel* latency_caption_ = nullptr;
    Sparkline* sparkline_ = nullptr;
    QGridLayout* grid_ = nullptr;
};

}  // namespace tokenscope::ui
