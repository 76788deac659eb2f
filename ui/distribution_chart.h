#pragma once
// A live bar chart of one sampling step: for each of the step's top candidates, its probability
// before sampling settings (softmax of the model's raw logits) next to its probability after
// sampling settings (temperature, top-k, top-p, min-p). It recomputes the "after" distribution
// locally whenever the settings change, so moving a slider re-shapes the bars at once without
// asking the engine; that is what lets a learner see what temperature and top-p do.
//
// Both distributions are renormalised over the candidates given (at most kMaxCandidates, the
// most likely ones): the engine only reports the top of the vocabulary, and bars that sum to 1
// over what is shown compare like with like. The repetition penalty is not applied here: it
// depends on the token history, which a single step's candidates do not carry.
#include <QVector>
#include <QWidget>

#include "panel_data.h"

namespace tokenscope::ui {

struct ShapedDistribution {
    QVector<double> raw;     // before sampling settings: softmax of the raw logits
    QVector<double> shaped;  // after them: top-k -> top-p -> min-p -> temperature; 0 = cut
};

// The engine sampler's stage order (engine/runtime/sampler.h), using its stage functions, on the
// given candidates; results are indexed like `candidates`. Temperature <= 0 is greedy: all mass
// on the best candidate (highest logit, ties to the lowest id).
ShapedDistribution shapeDistribution(const QVector<CandidateData>& candidates,
                                     const SamplingSettings& settings);

class DistributionChart : public QWidget {
    Q_OBJECT
  public:
    static constexpr int kMaxCandidates = 20;

    explicit DistributionChart(QWidget* parent = nullptr);

    // The last step's raw candidates (ids, pieces, raw logits). Kept in ranking order, at most
    // kMaxCandidates of them.
    void setLastStep(const QVector<CandidateData>& before);
    void setSettings(const SamplingSettings& settings);
    // Back to the empty state: no candidates, the default placeholder text.
    void clear();
    // What the chart says while it has no candidates (default: "No step yet." and a hint).
    void setPlaceholderText(const QString& text);
    QString placeholderText() const { return placeholder_; }
    // The legend's two labels, left to right, as painted.
    QStringList legendLabels() const;

    const QVector<CandidateData>& candidates() const { return candidates_; }
    const QVector<double>& rawProbabilities() const { return dist_.raw; }
    const QVector<double>& shapedProbabilities() const { return dist_.shaped; }
    const SamplingSettings& settings() const { return settings_; }

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

  protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

  private:
    struct Geometry {
        QRectF legend;
        int legend_lines = 1;
        QRectF rows;
        qreal row_height = 0;
        qreal label_width = 0;
        qreal value_width = 0;
    };
    Geometry geometry() const;
    int rowAt(const QPoint& pos) const;
    void recompute();

    static QString defaultPlaceholder();

    QVector<CandidateData> candidates_;
    QString placeholder_ = defaultPlaceholder();
    SamplingSettings settings_;
    ShapedDistribution dist_;
};

}  // namespace tokenscope::ui
