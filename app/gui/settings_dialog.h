#pragma once
// Edit › Settings… (Ctrl+,): what used to need command-line flags, kept with QSettings.
//   model/threads (0: one per core), model/context (KV cache tokens), model/kv_type,
//   model/device, model/chat_template (empty: the model's own), sampling/preset (the preset a
//   new session starts with), paths/models (the folder File › Models lists).
// The model settings apply when a model loads: on OK the window offers to reload the model now
// (AppSettings::needsReload tells which changes need it).
#include <QDialog>
#include <QString>
#include <QStringList>

class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace tokenscope::app {

struct AppSettings {
    int threads = 0;
    int context = 4096;
    QString kv_type = "f16";
    QString device = "auto";
    QString chat_template;  // empty: the model's own
    QString preset = "balanced";
    QString models_folder;  // empty: the default folder

    // What QSettings holds, with `defaults` where a key is missing.
    static AppSettings load(const AppSettings& defaults);
    void save() const;
    // Changes that only take effect when the model is loaded again.
    bool needsReload(const AppSettings& before) const;
};

// The built-in template families the dialog offers (tokenizer/chat_template.h's names).
QStringList chat_template_names();

class SettingsDialog : public QDialog {
    Q_OBJECT
  public:
    SettingsDialog(const AppSettings& current, const QString& default_models_folder,
                   QWidget* parent = nullptr);
    AppSettings settings() const;

    // For tests: the editors by what they set.
    QSpinBox* threadsBox() const { return threads_; }
    QSpinBox* contextBox() const { return context_; }
    QComboBox* kvTypeBox() const { return kv_type_; }
    QComboBox* deviceBox() const { return device_; }
    QComboBox* templateBox() const { return template_; }
    QComboBox* presetBox() const { return preset_; }
    QLineEdit* modelsFolderEdit() const { return models_; }

  private:
    QSpinBox* threads_ = nullptr;
    QSpinBox* context_ = nullptr;
    QComboBox* kv_type_ = nullptr;
    QComboBox* device_ = nullptr;
    QComboBox* template_ = nullptr;
    QComboBox* preset_ = nullptr;
    QLineEdit* models_ = nullptr;
};

}  // namespace tokenscope::app
