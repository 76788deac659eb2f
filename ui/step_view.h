#pragma once
// Step mode's pipeline for one step of the next-token loop, left to right in reading order:
//   1 the input token(s) that went through the model (the prefill: the whole prompt at once),
//   2 the chosen layer's attention for them in every head (prefill: an n x n block; a decode
//     step: one row over every earlier token),
//   3 the top candidates before and after the sampling settings (temperature, top-k, top-p,
//     min-p), as the sampling panel's chart draws them,
//   4 the sampled token,
// with what the step cost by the model's numbers (FLOPs, bytes of weights and KV cache).
// Steps already taken stay browsable (Back / Forward); Step asks the owner for one more token.
#include <QVector>
#include <QWidget>

#include "teaching_data.h"

class QLabel;
class QSpinBox;
class QToolButton;

namespace tokenscope::ui {

class DistributionChart;
class HeadGrid;

class StepView : public QWidget {
    Q_OBJECT
  public:
    explicit StepView(QWidget* parent = nullptr);

    void setModelShape(int layers, int heads);
    int stepCount() const { return int(steps_.size()); }
    // The step on screen (-1: none).
    int currentStep() const { return current_; }
    const StepData* shownStep() const;
    int layer() const;

    QToolButton* stepButton() const { return step_button_; }
    QToolButton* backButton() const { return back_button_; }
    QToolButton* forwardButton() const { return forward_button_; }
    HeadGrid* headGrid() const { return grid_; }
    DistributionChart* chart() const { return chart_; }
    // The texts of the pipeline's labels, for tests and screenshots.
    QString titleText() const;
    QString inputText() const;
    QString sampledText() const;
    QString costText() const;

  public slots:
    // A new step: stored and shown.
    void addStep(const tokenscope::ui::StepData& step);
    // New attention for the shown step (another layer was chosen).
    void setStepAttention(const tokenscope::ui::HeadGridData& grid);
    void showStep(int index);
    void back();
    void forward();
    // Forgets every step (a new reply starts).
    void clear();
    // Whether Step can be pressed (a model is loaded, the reply is not finished...).
    void setStepEnabled(bool enabled);

  signals:
    void stepRequested();
    // The shown step needs layer `layer`'s attention for its query rows.
    void attentionRequested(int layer, int first_query, int rows);

  protected:
    void resizeEvent(QResizeEvent* event) override;

  private:
    void refresh();
    void fitGridHeight();

    QVector<StepData> steps_;
    int current_ = -1;
    int heads_ = 0;
    QToolButton* back_button_ = nullptr;
    QToolButton* step_button_ = nullptr;
    QToolButton* forward_button_ = nullptr;
    QLabel* position_ = nullptr;
    QSpinBox* layer_box_ = nullptr;
    QLabel* title_ = nullptr;
    QLabel* input_ = nullptr;
    QLabel* attention_title_ = nullptr;
    HeadGrid* grid_ = nullptr;
    DistributionChart* chart_ = nullptr;
    QLabel* sampled_ = nullptr;
    QLabel* cost_ = nullptr;
};

}  // namespace tokenscope::ui
