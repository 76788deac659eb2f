#pragma once
// The speculative decoding controls of the sampling panel: off / prompt lookup / draft model
// (with a file picker for the draft GGUF), the largest k, and the k the engine uses now
// (shown live while a reply streams). A user change emits speculationChanged once; the main
// window hands it to the worker, which loads the engine again with it.
//
// Choosing "Draft model" without a draft file opens the file picker; cancelling it goes back
// to the previous choice, so the panel never emits a draft setting without a file.
#include <QWidget>
#include <functional>

#include "panel_data.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace tokenscope::ui {

class SpeculationControls : public QWidget {
    Q_OBJECT
  public:
    explicit SpeculationControls(QWidget* parent = nullptr);

    SpeculationSettings settings() const;
    QComboBox* modeBox() const { return mode_; }
    QSpinBox* maxKBox() const { return max_k_; }
    QLineEdit* draftPathEdit() const { return draft_path_; }
    QPushButton* browseButton() const { return browse_; }
    QLabel* currentKLabel() const { return current_k_; }
    // Replaces the file dialog (tests): returns the chosen path, or "" for cancel.
    void setDraftPicker(std::function<QString()> picker) { picker_ = std::move(picker); }

  public slots:
    // Shows `settings` without emitting (restored from QSettings, or what the engine runs).
    void setSettings(const tokenscope::ui::SpeculationSettings& settings);
    // The k the engine will propose next; negative: no reply measured yet ("—").
    void setCurrentK(int k);

  signals:
    void speculationChanged(const tokenscope::ui::SpeculationSettings& settings);

  private:
    void modeChosen();
    bool pickDraft();
    void userChanged();
    void updateEnabled();

    QComboBox* mode_ = nullptr;
    QLineEdit* draft_path_ = nullptr;
    QPushButton* browse_ = nullptr;
    QSpinBox* max_k_ = nullptr;
    QLabel* current_k_ = nullptr;
    std::function<QString()> picker_;
    SpeculationSettings shown_;  // the last settings set or emitted: where a cancel goes back to
    int updating_ = 0;
};

}  // namespace tokenscope::ui
