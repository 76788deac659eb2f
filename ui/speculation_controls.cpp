#include "speculation_controls.h"

#include <QComboBox>
#include <QFileDialog>
#include <QGridLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>

namespace tokenscope::ui {

namespace {
using Mode = SpeculationSettings::Mode;
}

SpeculationControls::SpeculationControls(QWidget* parent) : QWidget(parent) {
    auto* grid = new QGridLayout(this);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->setHorizontalSpacing(8);
    grid->setVerticalSpacing(4);
    grid->setColumnStretch(1, 1);

    mode_ = new QComboBox(this);
    mode_->setObjectName(QStringLiteral("speculationMode"));
    mode_->addItem(tr("Off"), int(Mode::Off));
    mode_->addItem(tr("Prompt lookup"), int(Mode::Lookup));
    mode_->addItem(tr("Draft model"), int(Mode::Draft));
    mode_->setToolTip(
        tr("Speculative decoding: something cheap guesses the next few tokens and the model "
           "checks all guesses in one pass. The text is exactly what the model alone would "
           "write; only the speed changes.\n"
           "Prompt lookup: guesses by copying what followed the same words earlier in the "
           "conversation (good when the answer repeats the prompt).\n"
           "Draft model: a smaller model with the same vocabulary guesses."));
    auto* mode_label = new QLabel(tr("&Speculation"), this);
    mode_label->setBuddy(mode_);
    grid->addWidget(mode_label, 0, 0);
    grid->addWidget(mode_, 0, 1, 1, 2);

    draft_path_ = new QLineEdit(this);
    draft_path_->setObjectName(QStringLiteral("draftPath"));
    draft_path_->setPlaceholderText(tr("draft model (.gguf)"));
    draft_path_->setToolTip(
        tr("The draft model: a GGUF file with the same vocabulary as the "
           "chat model, e.g. a smaller model of the same family."));
    draft_path_->setAccessibleName(tr("Draft model file"));
    browse_ = new QPushButton(tr("Browse…"), this);
    browse_->setObjectName(QStringLiteral("draftBrowse"));
    auto* draft_label = new QLabel(tr("Draft"), this);
    grid->addWidget(draft_label, 1, 0);
    grid->addWidget(draft_path_, 1, 1);
    grid->addWidget(browse_, 1, 2);

    max_k_ = new QSpinBox(this);
    max_k_->setObjectName(QStringLiteral("speculationMaxK"));
    max_k_->setRange(1, SpeculationSettings::kMaxK);
    max_k_->setKeyboardTracking(false);  // typing "12" must not reload the engine for "1"
    max_k_->setAlignment(Qt::AlignRight);
    max_k_->setToolTip(
        tr("Most tokens guessed per step. The engine picks k up to this from "
           "how often guesses were accepted and what checking them costs."));
    auto* k_label = new QLabel(tr("Max &k"), this);
    k_label->setBuddy(max_k_);
    current_k_ = new QLabel(this);
    current_k_->setObjectName(QStringLiteral("currentK"));
    current_k_->setToolTip(
        tr("The k the engine proposes next: it grows while guesses are "
           "accepted and drops to 0 (plain decoding) when they are not."));
    grid->addWidget(k_label, 2, 0);
    grid->addWidget(max_k_, 2, 1);
    grid->addWidget(current_k_, 2, 2);

    connect(mode_, &QComboBox::currentIndexChanged, this, [this] {
        if (updating_ == 0) modeChosen();
    });
    connect(browse_, &QPushButton::clicked, this, [this] {
        if (pickDraft() && mode_->currentData().toInt() == int(Mode::Draft)) userChanged();
    });
    connect(draft_path_, &QLineEdit::editingFinished, this, [this] {
        if (updating_ == 0 && mode_->currentData().toInt() == int(Mode::Draft) &&
            !draft_path_->text().isEmpty())
            userChanged();
    });
    connect(max_k_, &QSpinBox::valueChanged, this, [this] {
        if (updating_ == 0 && mode_->currentData().toInt() != int(Mode::Off)) userChanged();
    });

    setSettings(SpeculationSettings{});
    setCurrentK(-1);
}

SpeculationSettings SpeculationControls::settings() const {
    SpeculationSettings s;
    s.mode = Mode(mode_->currentData().toInt());
    s.draft_path = draft_path_->text().trimmed();
    s.max_k = max_k_->value();
    return s;
}

void SpeculationControls::setSettings(const SpeculationSettings& s) {
    ++updating_;
    mode_->setCurrentIndex(mode_->findData(int(s.mode)));
    draft_path_->setText(s.draft_path);
    max_k_->setValue(s.max_k);
    --updating_;
    shown_ = settings();
    updateEnabled();
}

void SpeculationControls::setCurrentK(int k) {
    if (k < 0 || mode_->currentData().toInt() == int(Mode::Off)) {
        current_k_->setText(tr("now: —"));
    } else {
        current_k_->setText(k == 0 ? tr("now: 0 (paused)") : tr("now: %1").arg(k));
    }
}

void SpeculationControls::modeChosen() {
    if (mode_->currentData().toInt() == int(Mode::Draft) &&
        draft_path_->text().trimmed().isEmpty() && !pickDraft()) {
        // No draft file: back to what was shown, without a signal.
        setSettings(shown_);
        return;
    }
    userChanged();
}

bool SpeculationControls::pickDraft() {
    const QString path = picker_ ? picker_()
                                 : QFileDialog::getOpenFileName(
                                       this, tr("Choose a draft model"), draft_path_->text(),
                                       tr("GGUF models (*.gguf);;All files (*)"));
    if (path.isEmpty()) return false;
    ++updating_;
    draft_path_->setText(path);
    --updating_;
    return true;
}

void SpeculationControls::userChanged() {
    updateEnabled();
    const SpeculationSettings s = settings();
    if (s == shown_) return;
    shown_ = s;
    setCurrentK(-1);
    emit speculationChanged(s);
}

void SpeculationControls::updateEnabled() {
    const auto mode = Mode(mode_->currentData().toInt());
    draft_path_->setEnabled(mode == Mode::Draft);
    browse_->setEnabled(mode == Mode::Draft);
    max_k_->setEnabled(mode != Mode::Off);
    if (mode == Mode::Off) setCurrentK(-1);
}

}  // namespace tokenscope::ui
