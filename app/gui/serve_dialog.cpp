// The serve dialog (see serve_dialog.h).
#include "serve_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

namespace tokenscope::app {

ServeDialog::ServeDialog(const QString& model_name, QWidget* parent) : QDialog(parent) {
    setObjectName("serveDialog");
    setWindowTitle(tr("Serve this model"));
    QSettings s;
    auto* intro =
        new QLabel(tr("Other programs can use <b>%1</b> through the OpenAI API "
                      "(<code>/v1/chat/completions</code>, <code>/v1/completions</code>, "
                      "<code>/v1/models</code>, <code>/metrics</code>), as with "
                      "<code>tokenscope-cli serve</code>. The server loads the model a second time "
                      "(the weights' memory is shared) with its own KV cache.")
                       .arg(model_name.toHtmlEscaped()),
                   this);
    intro->setWordWrap(true);

    port_ = new QSpinBox(this);
    port_->setObjectName("servePort");
    port_->setRange(0, 65535);
    port_->setSpecialValueText(tr("any free port"));
    port_->setValue(s.value("serve/port", 8080).toInt());
    public_ = new QCheckBox(tr("Reachable from other machines (needs an API key)"), this);
    public_->setObjectName("servePublic");
    public_->setChecked(s.value("serve/public", false).toBool());
    key_ = new QLineEdit(this);
    key_->setObjectName("serveKey");
    key_->setEchoMode(QLineEdit::PasswordEchoOnEdit);
    key_->setPlaceholderText(tr("none (this machine only)"));
    key_->setText(s.value("serve/api_key").toString());
    remember_key_ = new QCheckBox(tr("Remember the key"), this);
    remember_key_->setChecked(s.contains("serve/api_key"));
    parallel_ = new QSpinBox(this);
    parallel_->setObjectName("serveParallel");
    parallel_->setRange(1, 64);
    parallel_->setValue(s.value("serve/parallel", 4).toInt());
    parallel_->setToolTip(
        tr("Requests decoded together (continuous batching); more wait in a "
           "queue, and a full queue answers 429"));

    auto* form = new QFormLayout;
    form->addRow(tr("Port:"), port_);
    form->addRow(QString(), public_);
    form->addRow(tr("API key:"), key_);
    form->addRow(QString(), remember_key_);
    form->addRow(tr("Parallel requests:"), parallel_);

    note_ = new QLabel(this);
    note_->setObjectName("serveNote");
    note_->setWordWrap(true);
    buttons_ = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons_->button(QDialogButtonBox::Ok)->setText(tr("Start serving"));
    connect(buttons_, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(public_, &QCheckBox::toggled, this, &ServeDialog::update_state);
    connect(key_, &QLineEdit::textChanged, this, &ServeDialog::update_state);
    connect(port_, &QSpinBox::valueChanged, this, &ServeDialog::update_state);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(intro);
    layout->addLayout(form);
    layout->addWidget(note_);
    layout->addWidget(buttons_);
    update_state();
}

ServeSettings ServeDialog::settings() const {
    ServeSettings s;
    s.host = public_->isChecked() ? QStringLiteral("0.0.0.0") : QStringLiteral("127.0.0.1");
    s.port = port_->value();
    s.api_key = key_->text().trimmed();
    s.parallel = parallel_->value();
    return s;
}

void ServeDialog::remember() const {
    QSettings s;
    s.setValue("serve/port", port_->value());
    s.setValue("serve/public", public_->isChecked());
    s.setValue("serve/parallel", parallel_->value());
    if (remember_key_->isChecked() && !key_->text().trimmed().isEmpty())
        s.setValue("serve/api_key", key_->text().trimmed());
    else
        s.remove("serve/api_key");
}

void ServeDialog::update_state() {
    const bool needs_key = public_->isChecked() && key_->text().trimmed().isEmpty();
    buttons_->button(QDialogButtonBox::Ok)->setEnabled(!needs_key);
    const QString port = port_->value() == 0 ? tr("a free port") : QString::number(port_->value());
    if (needs_key)
        note_->setText(
            tr("Set an API key: without one, anyone who can reach this machine "
               "could use the model."));
    else if (public_->isChecked())
        note_->setText(tr("Listens on every network address, port %1; clients send "
                          "<code>Authorization: Bearer KEY</code>.")
                           .arg(port));
    else
        note_->setText(
            tr("Listens on 127.0.0.1, port %1: programs on this machine only.").arg(port));
}

}  // namespace tokenscope::app
