#include "settings_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QThread>
#include <QVBoxLayout>

namespace tokenscope::app {

QStringList chat_template_names() {
    return {"chatml", "gemma", "llama2", "llama3", "mistral", "phi3", "zephyr"};
}

AppSettings AppSettings::load(const AppSettings& defaults) {
    QSettings s;
    AppSettings a;
    a.threads = s.value("model/threads", defaults.threads).toInt();
    a.context = s.value("model/context", defaults.context).toInt();
    a.kv_type = s.value("model/kv_type", defaults.kv_type).toString();
    a.device = s.value("model/device", defaults.device).toString();
    a.chat_template = s.value("model/chat_template", defaults.chat_template).toString();
    // A name edited into the file by hand that no longer exists: the model's own template.
    if (!a.chat_template.isEmpty() && !chat_template_names().contains(a.chat_template))
        a.chat_template.clear();
    a.preset = s.value("sampling/preset", defaults.preset).toString();
    a.models_folder = s.value("paths/models", defaults.models_folder).toString();
    return a;
}

void AppSettings::save() const {
    QSettings s;
    s.setValue("model/threads", threads);
    s.setValue("model/context", context);
    s.setValue("model/kv_type", kv_type);
    s.setValue("model/device", device);
    s.setValue("model/chat_template", chat_template);
    s.setValue("sampling/preset", preset);
    s.setValue("paths/models", models_folder);
}

bool AppSettings::needsReload(const AppSettings& before) const {
    return threads != before.threads || context != before.context || kv_type != before.kv_type ||
           device != before.device || chat_template != before.chat_template;
}

namespace {
void select_data(QComboBox* box, const QString& value) {
    const int i = box->findData(value);
    box->setCurrentIndex(i >= 0 ? i : 0);
}
}  // namespace

SettingsDialog::SettingsDialog(const AppSettings& current, const QString& default_models_folder,
                               QWidget* parent)
    : QDialog(parent) {
    setWindowTitle(tr("Settings"));
    setObjectName(QStringLiteral("settingsDialog"));
    auto* root = new QVBoxLayout(this);
    auto* form = new QFormLayout;

    threads_ = new QSpinBox(this);
    threads_->setRange(0, 512);
    threads_->setSpecialValueText(
        tr("one per core (%1)").arg(std::max(1, QThread::idealThreadCount())));
    threads_->setValue(current.threads);
    threads_->setToolTip(tr("Engine threads for the matrix products"));
    form->addRow(tr("&Threads:"), threads_);

    context_ = new QSpinBox(this);
    context_->setRange(256, 262144);
    context_->setSingleStep(1024);
    context_->setSuffix(tr(" tokens"));
    context_->setValue(current.context);
    context_->setToolTip(
        tr("KV cache capacity: the longest conversation the model can hold. "
           "Memory grows with it (the Memory panel shows how much)."));
    form->addRow(tr("&Context size:"), context_);

    kv_type_ = new QComboBox(this);
    kv_type_->addItem(tr("F16 (default)"), "f16");
    kv_type_->addItem(tr("Q8 (about half the memory)"), "q8");
    kv_type_->addItem(tr("F32 (exact, twice F16)"), "f32");
    select_data(kv_type_, current.kv_type);
    form->addRow(tr("&KV cache type:"), kv_type_);

    device_ = new QComboBox(this);
    device_->addItem(tr("Automatic (a CUDA GPU when there is one)"), "auto");
    device_->addItem(tr("CPU"), "cpu");
    device_->addItem(tr("CUDA GPU"), "cuda");
    select_data(device_, current.device);
    form->addRow(tr("&Device:"), device_);

    template_ = new QComboBox(this);
    template_->addItem(tr("The model's own"), QString());
    for (const QString& name : chat_template_names()) template_->addItem(name, name);
    select_data(template_, current.chat_template);
    template_->setToolTip(
        tr("How a conversation is turned into the prompt. The model's own "
           "template (from its GGUF file) is right for nearly every model."));
    form->addRow(tr("Chat &template:"), template_);

    preset_ = new QComboBox(this);
    preset_->addItem(tr("Precise"), "precise");
    preset_->addItem(tr("Balanced"), "balanced");
    preset_->addItem(tr("Creative"), "creative");
    select_data(preset_, current.preset);
    preset_->setToolTip(tr("The sampling settings tokenscope starts with"));
    form->addRow(tr("Default sampling &preset:"), preset_);

    auto* folder = new QHBoxLayout;
    models_ = new QLineEdit(current.models_folder, this);
    models_->setPlaceholderText(default_models_folder);
    models_->setToolTip(tr("The folder File › Models lists; empty: %1").arg(default_models_folder));
    auto* browse = new QPushButton(tr("&Browse…"), this);
    connect(browse, &QPushButton::clicked, this, [this, default_models_folder] {
        const QString dir = QFileDialog::getExistingDirectory(
            this, tr("Models folder"),
            models_->text().isEmpty() ? default_models_folder : models_->text());
        if (!dir.isEmpty()) models_->setText(dir);
    });
    folder->addWidget(models_, 1);
    folder->addWidget(browse);
    // A row holding a layout gets a label without a buddy, whose "&" would show: give it one.
    auto* folder_label = new QLabel(tr("&Models folder:"), this);
    folder_label->setBuddy(models_);
    form->addRow(folder_label, folder);
    root->addLayout(form);

    auto* note = new QLabel(tr("Threads, context size, KV cache type, device and chat template "
                               "take effect when a model loads; you will be asked whether to "
                               "reload the current one."),
                            this);
    note->setWordWrap(true);
    note->setForegroundRole(QPalette::PlaceholderText);
    root->addWidget(note);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    root->addWidget(buttons);
}

AppSettings SettingsDialog::settings() const {
    AppSettings a;
    a.threads = threads_->value();
    a.context = context_->value();
    a.kv_type = kv_type_->currentData().toString();
    a.device = device_->currentData().toString();
    a.chat_template = template_->currentData().toString();
    a.preset = preset_->currentData().toString();
    a.models_folder = models_->text().trimmed();
    return a;
}

}  // namespace tokenscope::app
