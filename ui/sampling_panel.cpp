#include "sampling_panel.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QRandomGenerator>
#include <QSignalBlocker>
#include <QSlider>
#include <QVBoxLayout>
#include <cmath>

#include "distribution_chart.h"
#include "message_document.h"
#include "speculation_controls.h"

namespace tokenscope::ui {

namespace {

constexpr double kMaxSeed = 9007199254740991.0;  // 2^53 - 1: exact in a double spin box

struct PresetValues {
    float temperature;
    int top_k;
    float top_p;
    float min_p;
};

constexpr PresetValues kPresets[] = {
    {0.2f, 20, 0.90f, 0.10f},   // Precise
    {0.8f, 40, 0.95f, 0.05f},   // Balanced
    {1.2f, 100, 0.98f, 0.02f},  // Creative
};

bool near(double a, double b) {
    return std::abs(a - b) < 1e-4;
}

}  // namespace

SamplingPanel::SamplingPanel(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(8);

    auto* preset_row = new QHBoxLayout;
    preset_row->setSpacing(4);
    auto* preset_label = new QLabel(tr("Preset:"), this);
    preset_row->addWidget(preset_label);
    const QString names[] = {tr("Precise"), tr("Balanced"), tr("Creative")};
    for (int i = 0; i < 3; ++i) {
        const PresetValues& v = kPresets[i];
        auto* b = new QPushButton(names[i], this);
        b->setCheckable(true);
        b->setToolTip(tr("temperature %1, top-k %2, top-p %3, min-p %4")
                          .arg(double(v.temperature), 0, 'f', 1)
                          .arg(v.top_k)
                          .arg(double(v.top_p), 0, 'f', 2)
                          .arg(double(v.min_p), 0, 'f', 2));
        connect(b, &QPushButton::clicked, this, [this, i] { applyPreset(Preset(i)); });
        presets_[i] = b;
        preset_row->addWidget(b);
    }
    preset_row->addStretch(1);
    layout->addLayout(preset_row);

    grid_ = new QGridLayout;
    grid_->setHorizontalSpacing(8);
    grid_->setVerticalSpacing(4);
    grid_->setColumnStretch(1, 1);
    layout->addLayout(grid_);
    addKnob(QStringLiteral("temperature"), tr("&Temperature"),
            tr("Divides the logits: below 1 sharpens the distribution, above 1 flattens it; "
               "0 always picks the most likely token."),
            0.0, 2.0, 0.01, 2);
    addKnob(QStringLiteral("top_k"), tr("Top-&k"), tr("Keep only the k most likely tokens."), 0,
            200, 1, 0, tr("off"));
    addKnob(QStringLiteral("top_p"), tr("Top-&p"),
            tr("Keep the most likely tokens until their probabilities add up to p."), 0.0, 1.0,
            0.01, 2);
    addKnob(QStringLiteral("min_p"), tr("&Min-p"),
            tr("Drop tokens less likely than min-p times the most likely one."), 0.0, 1.0, 0.01, 2,
            tr("off"));
    addKnob(QStringLiteral("repeat_penalty"), tr("R&epetition penalty"),
            tr("Makes tokens already seen in the window less likely (1 = off)."), 1.0, 2.0, 0.01, 2,
            tr("off"));
    addKnob(QStringLiteral("repeat_window"), tr("Penalty &window"),
            tr("How many recent tokens the repetition penalty looks at."), 0, 1024, 1, 0);
    addKnob(QStringLiteral("max_tokens"), tr("Ma&x tokens"),
            tr("Stop after this many generated tokens."), 1, 8192, 1, 0);

    // Seed: fixed (reproducible) or a fresh random one per request.
    auto* seed_row = new QHBoxLayout;
    fixed_seed_ = new QCheckBox(tr("&Fixed seed"), this);
    fixed_seed_->setToolTip(tr("Unchecked: every request draws with a new random seed."));
    seed_ = new QDoubleSpinBox(this);
    seed_->setDecimals(0);
    seed_->setRange(0, kMaxSeed);
    seed_->setObjectName(QStringLiteral("seedSpin"));
    seed_->setAccessibleName(tr("Seed"));
    reroll_ = new QPushButton(tr("New"), this);
    reroll_->setToolTip(tr("Pick a new random seed"));
    seed_row->addWidget(fixed_seed_);
    seed_row->addWidget(seed_, 1);
    seed_row->addWidget(reroll_);
    grid_->addLayout(seed_row, grid_->rowCount(), 0, 1, 3);
    spins_.insert(QStringLiteral("seed"), seed_);
    connect(fixed_seed_, &QCheckBox::toggled, this, [this](bool on) {
        seed_->setEnabled(on);
        reroll_->setEnabled(on);
        userChanged();
    });
    connect(seed_, &QDoubleSpinBox::valueChanged, this, &SamplingPanel::userChanged);
    connect(reroll_, &QPushButton::clicked, this, [this] {
        seed_->setValue(double(QRandomGenerator::global()->bounded(quint64(kMaxSeed))));
    });

    // Thinking models (Qwen 3): their template's enable_thinking switch. Shown only when the
    // loaded model has one (setThinkingAvailable).
    think_ = new QCheckBox(tr("Think &before answering"), this);
    think_->setObjectName(QStringLiteral("thinkBox"));
    think_->setToolTip(
        tr("This model can write its reasoning (shown folded in the chat) before the answer. "
           "Off: it answers at once (the template's enable_thinking = false)."));
    think_->setVisible(false);
    grid_->addWidget(think_, grid_->rowCount(), 0, 1, 3);
    connect(think_, &QCheckBox::toggled, this, [this] { userChanged(); });

    auto* speculation_box = new QGroupBox(tr("Speculative decoding"), this);
    speculation_box->setObjectName(QStringLiteral("speculationBox"));
    auto* speculation_layout = new QVBoxLayout(speculation_box);
    speculation_layout->setContentsMargins(6, 4, 6, 6);
    speculation_ = new SpeculationControls(speculation_box);
    speculation_layout->addWidget(speculation_);
    layout->addWidget(speculation_box);

    // The chart's box is titled with the step it shows (see showStep); the line under the
    // title says what the two bars are, in the words the token inspector uses too.
    chart_box_ = new QGroupBox(this);
    chart_box_->setObjectName(QStringLiteral("stepBox"));
    auto* chart_layout = new QVBoxLayout(chart_box_);
    chart_layout->setContentsMargins(4, 4, 4, 4);
    explanation_ = new QLabel(settingsDistributionsExplanation(), chart_box_);
    explanation_->setObjectName(QStringLiteral("distributionsExplanation"));
    explanation_->setWordWrap(true);
    explanation_->setForegroundRole(QPalette::PlaceholderText);
    // The chart re-shapes with the settings on this panel, which cannot include the repetition
    // penalty: that depends on the tokens before the step.
    explanation_->setToolTip(
        tr("Here the bars after sampling settings use the settings above, without the "
           "repetition penalty (it depends on the earlier tokens)."));
    chart_layout->addWidget(explanation_);
    chart_ = new DistributionChart(chart_box_);
    chart_layout->addWidget(chart_, 1);
    layout->addWidget(chart_box_, 1);
    clearStep();

    setSettings(SamplingSettings{});
}

void SamplingPanel::addKnob(const QString& name, const QString& label, const QString& help,
                            double min, double max, double step, int decimals,
                            const QString& off_text) {
    const int row = grid_->rowCount();
    const double scale = 1.0 / step;
    auto* slider = new QSlider(Qt::Horizontal, this);
    slider->setRange(int(std::lround(min * scale)), int(std::lround(max * scale)));
    slider->setPageStep(int(std::lround((max - min) * scale / 10)));
    slider->setObjectName(name + QStringLiteral("Slider"));
    slider->setToolTip(help);
    auto* spin = new QDoubleSpinBox(this);
    spin->setRange(min, max);
    spin->setSingleStep(step);
    spin->setDecimals(decimals);
    spin->setObjectName(name + QStringLiteral("Spin"));
    spin->setToolTip(help);
    spin->setKeyboardTracking(false);  // typing "150" must not emit 1, 15, 150
    spin->setAlignment(Qt::AlignRight);
    if (!off_text.isEmpty()) spin->setSpecialValueText(off_text);  // shown at the minimum
    auto* text = new QLabel(label, this);
    text->setBuddy(spin);
    text->setToolTip(help);
    slider->setAccessibleName(QString(label).remove(u'&'));
    spin->setAccessibleName(QString(label).remove(u'&'));
    grid_->addWidget(text, row, 0);
    grid_->addWidget(slider, row, 1);
    grid_->addWidget(spin, row, 2);
    sliders_.insert(name, slider);
    spins_.insert(name, spin);
    scales_.insert(name, scale);

    connect(slider, &QSlider::valueChanged, this, [this, spin, scale](int v) {
        const QSignalBlocker block(spin);
        spin->setValue(v / scale);
        userChanged();
    });
    connect(spin, &QDoubleSpinBox::valueChanged, this, [this, slider, scale](double v) {
        const QSignalBlocker block(slider);
        slider->setValue(int(std::lround(v * scale)));
        userChanged();
    });
}

void SamplingPanel::setValue(const QString& name, double v) {
    QDoubleSpinBox* spin = spins_.value(name);
    QSlider* slider = sliders_.value(name);
    const QSignalBlocker b1(spin);
    spin->setValue(v);
    if (slider) {
        const QSignalBlocker b2(slider);
        slider->setValue(int(std::lround(v * scales_.value(name))));
    }
}

double SamplingPanel::value(const QString& name) const {
    return spins_.value(name)->value();
}

SamplingSettings SamplingPanel::settings() const {
    SamplingSettings s;
    s.temperature = float(value(QStringLiteral("temperature")));
    s.top_k = int(std::lround(value(QStringLiteral("top_k"))));
    s.top_p = float(value(QStringLiteral("top_p")));
    s.min_p = float(value(QStringLiteral("min_p")));
    s.repeat_penalty = float(value(QStringLiteral("repeat_penalty")));
    s.repeat_window = int(std::lround(value(QStringLiteral("repeat_window"))));
    s.max_tokens = int(std::lround(value(QStringLiteral("max_tokens"))));
    s.fixed_seed = fixed_seed_->isChecked();
    s.seed = quint64(seed_->value());
    s.think = think_->isChecked();
    return s;
}

void SamplingPanel::setThinkingAvailable(bool available) {
    think_->setVisible(available);
}

void SamplingPanel::setSettings(const SamplingSettings& s) {
    ++updating_;
    setValue(QStringLiteral("temperature"), double(s.temperature));
    setValue(QStringLiteral("top_k"), s.top_k);
    setValue(QStringLiteral("top_p"), double(s.top_p));
    setValue(QStringLiteral("min_p"), double(s.min_p));
    setValue(QStringLiteral("repeat_penalty"), double(s.repeat_penalty));
    setValue(QStringLiteral("repeat_window"), s.repeat_window);
    setValue(QStringLiteral("max_tokens"), s.max_tokens);
    {
        const QSignalBlocker b(seed_);
        seed_->setValue(double(std::min<quint64>(s.seed, quint64(kMaxSeed))));
    }
    fixed_seed_->setChecked(s.fixed_seed);
    think_->setChecked(s.think);
    seed_->setEnabled(s.fixed_seed);
    reroll_->setEnabled(s.fixed_seed);
    --updating_;
    chart_->setSettings(settings());
    updatePresetButtons();
}

SamplingSettings SamplingPanel::presetSettings(Preset preset, SamplingSettings base) {
    const PresetValues& v = kPresets[int(preset)];
    base.temperature = v.temperature;
    base.top_k = v.top_k;
    base.top_p = v.top_p;
    base.min_p = v.min_p;
    return base;
}

void SamplingPanel::applyPreset(Preset preset) {
    setSettings(presetSettings(preset, settings()));
    emit settingsChanged(settings());
}

QPushButton* SamplingPanel::presetButton(Preset preset) const {
    return presets_[int(preset)];
}

void SamplingPanel::setLastStep(const QVector<CandidateData>& before) {
    if (before.isEmpty()) {
        clearStep();
        return;
    }
    chart_->setLastStep(before);
    chart_box_->setTitle(tr("Last step"));
}

void SamplingPanel::showStep(const TokenData& token) {
    chart_->setLastStep(token.before);
    const QString title =
        tr("Step of token “%1” (id %2)").arg(visiblePiece(token.text)).arg(token.id);
    chart_box_->setTitle(title);
    // Tokens can arrive without candidates (e.g. from a conversation restored from disk).
    chart_->setPlaceholderText(tr("No candidates were recorded for this token."));
}

void SamplingPanel::clearStep() {
    chart_->clear();
    chart_box_->setTitle(tr("No step yet"));
}

QString SamplingPanel::stepTitle() const {
    return chart_box_->title();
}

void SamplingPanel::userChanged() {
    if (updating_ > 0) return;
    const SamplingSettings s = settings();
    chart_->setSettings(s);
    updatePresetButtons();
    emit settingsChanged(s);
}

void SamplingPanel::updatePresetButtons() {
    const SamplingSettings s = settings();
    for (int i = 0; i < 3; ++i) {
        const PresetValues& v = kPresets[i];
        presets_[i]->setChecked(near(s.temperature, v.temperature) && s.top_k == v.top_k &&
                                near(s.top_p, v.top_p) && near(s.min_p, v.min_p));
    }
}

}  // namespace tokenscope::ui
