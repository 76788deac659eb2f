#pragma once
// The sampling settings: temperature, top-k, top-p, min-p, repetition penalty and its window,
// seed (fixed or random per request) and max tokens. Each numeric setting is a slider and a spin
// box kept in sync; every user change emits settingsChanged() once and re-shapes the
// DistributionChart underneath immediately (computed locally, no engine round trip).
//
// Presets (they set temperature / top-k / top-p / min-p and leave the other settings alone):
//   Precise   temperature 0.2, top-k 20,  top-p 0.90, min-p 0.10 — near-deterministic answers
//   Balanced  temperature 0.8, top-k 40,  top-p 0.95, min-p 0.05 — the engine's defaults
//   Creative  temperature 1.2, top-k 100, top-p 0.98, min-p 0.02 — varied, riskier wording
// The preset button whose values match the current settings is shown checked.
//
// Under them, the speculative decoding controls (SpeculationControls: off / prompt lookup /
// draft model, max k, the current k); they are engine options, not per-request settings, and
// have their own signal.
//
// Under the settings, a DistributionChart shows one step's candidates before and after sampling
// settings, titled with the step it shows: a token the user selected (showStep), the last
// step of a stream (setLastStep), or none (clearStep).
//
// Ranges: temperature 0-2 (0 = greedy), top-k 0-200 (0 = off), top-p 0-1 (1 = off),
// min-p 0-1 (0 = off), repetition penalty 1-2 (1 = off), window 0-1024 tokens, max tokens
// 1-8192. A fixed seed is limited to 0..2^53-1 (what a spin box holds exactly).
#include <QHash>
#include <QVector>
#include <QWidget>

#include "panel_data.h"

class QAbstractButton;
class QCheckBox;
class QDoubleSpinBox;
class QGridLayout;
class QGroupBox;
class QLabel;
class QPushButton;
class QSlider;

namespace tokenscope::ui {

class DistributionChart;
class SpeculationControls;

class SamplingPanel : public QWidget {
    Q_OBJECT
  public:
    enum class Preset { Precise, Balanced, Creative };
    Q_ENUM(Preset)

    explicit SamplingPanel(QWidget* parent = nullptr);

    // `base` with the preset's temperature / top-k / top-p / min-p.
    static SamplingSettings presetSettings(Preset preset, SamplingSettings base = {});

    SamplingSettings settings() const;
    DistributionChart* chart() const { return chart_; }
    SpeculationControls* speculationControls() const { return speculation_; }
    // Controls by setting name ("temperature", "top_k", "top_p", "min_p", "repeat_penalty",
    // "repeat_window", "max_tokens", "seed"), for tests and the main window's shortcuts.
    QSlider* slider(const QString& name) const { return sliders_.value(name); }
    QDoubleSpinBox* spinBox(const QString& name) const { return spins_.value(name); }
    QCheckBox* fixedSeedBox() const { return fixed_seed_; }
    QCheckBox* thinkBox() const { return think_; }
    // Shows the "Think before answering" switch only for models that have one (their chat
    // template reads enable_thinking); hidden, it keeps its value.
    void setThinkingAvailable(bool available);
    QPushButton* presetButton(Preset preset) const;
    // The chart box's title: "Step of token “·Paris” (id 1234)", "Last step", "No step yet".
    QString stepTitle() const;
    // The one-line explanation of the two distributions shown above the chart.
    QLabel* explanationLabel() const { return explanation_; }

  public slots:
    // Shows `settings` without emitting settingsChanged (it came from outside, e.g. a restored
    // conversation).
    void setSettings(const tokenscope::ui::SamplingSettings& settings);
    // Applies a preset as a user action: emits settingsChanged once.
    void applyPreset(tokenscope::ui::SamplingPanel::Preset preset);
    // The last step's candidates (before sampling settings) for the chart, titled "Last step";
    // an empty list is clearStep().
    void setLastStep(const QVector<tokenscope::ui::CandidateData>& before);
    // The step that produced `token` (its `before` candidates), titled with the token's text
    // and id: what the main window shows for the selected or last visible token.
    void showStep(const tokenscope::ui::TokenData& token);
    // No step: the chart's empty state ("No step yet."), e.g. after a conversation switch.
    void clearStep();

  signals:
    void settingsChanged(const tokenscope::ui::SamplingSettings& settings);

  private:
    void addKnob(const QString& name, const QString& label, const QString& help, double min,
                 double max, double step, int decimals, const QString& off_text = {});
    void setValue(const QString& name, double value);
    double value(const QString& name) const;
    void userChanged();
    void updatePresetButtons();

    QHash<QString, QSlider*> sliders_;
    QHash<QString, QDoubleSpinBox*> spins_;
    QHash<QString, double> scales_;
    QCheckBox* fixed_seed_ = nullptr;
    QCheckBox* think_ = nullptr;
    QDoubleSpinBox* seed_ = nullptr;
    QPushButton* reroll_ = nullptr;
    QPushButton* presets_[3] = {nullptr, nullptr, nullptr};
    DistributionChart* chart_ = nullptr;
    SpeculationControls* speculation_ = nullptr;
    QGroupBox* chart_box_ = nullptr;
    QLabel* explanation_ = nullptr;
    QGridLayout* grid_ = nullptr;
    int updating_ = 0;  // > 0 while the panel itself moves controls: no signals then
};

}  // namespace tokenscope::ui
