#include "connect_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPointer>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "remote_engine.h"

namespace tokenscope::app {

namespace {
struct Listing {
    QStringList models;
    QString error;
};

Listing list_models(const RemoteSettings& s) {
    Listing out;
    try {
        remote::RemoteOptions o;
        o.url = s.url.trimmed().toStdString();
        o.api_key = s.api_key.toStdString();
        o.connect_timeout_s = 5;
        remote::RemoteEngine engine(o);
        for (const auto& m : engine.models()) out.models << QString::fromStdString(m.id);
    } catch (const std::exception& e) {
        out.error = QString::fromUtf8(e.what());
    }
    return out;
}
}  // namespace

ConnectDialog::ConnectDialog(const RemoteSettings& initial, bool remember_key, QWidget* parent)
    : QDialog(parent) {
    setObjectName("connectDialog");
    setWindowTitle(tr("Connect to server"));
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(
        tr("Chat with a model served elsewhere over the OpenAI API: vLLM, SGLang, llama.cpp's "
           "llama-server, Ollama, or tokenscope-cli serve (which also shows its token candidates "
           "and KV blocks)."),
        this);
    intro->setWordWrap(true);
    layout->addWidget(intro);
    auto* form = new QFormLayout;
    url_ = new QLineEdit(initial.url, this);
    url_->setObjectName("serverUrl");
    url_->setPlaceholderText(QStringLiteral("http://127.0.0.1:8000/v1"));
    form->addRow(tr("Server &URL:"), url_);
    key_ = new QLineEdit(initial.api_key, this);
    key_->setObjectName("apiKey");
    key_->setEchoMode(QLineEdit::Password);
    key_->setPlaceholderText(tr("none"));
    form->addRow(tr("API &key:"), key_);
    remember_key_ =
        new QCheckBox(tr("Remember the key (stored unencrypted in the settings file)"), this);
    remember_key_->setChecked(remember_key);
    form->addRow(QString(), remember_key_);
    auto* model_row = new QHBoxLayout;
    model_ = new QComboBox(this);
    model_->setObjectName("serverModel");
    model_->setEditable(true);  // servers without /v1/models: type the name
    model_->setMinimumWidth(260);
    if (!initial.model.isEmpty()) model_->addItem(initial.model);
    list_ = new QPushButton(tr("&List models"), this);
    model_row->addWidget(model_, 1);
    model_row->addWidget(list_);
    form->addRow(tr("&Model:"), model_row);
    layout->addLayout(form);
    status_ = new QLabel(this);
    status_->setObjectName("connectStatus");
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(status_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Connect"));
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (url_->text().trimmed().isEmpty()) {
            status_->setText(tr("Enter the server's URL."));
            return;
        }
        accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(list_, &QPushButton::clicked, this, &ConnectDialog::listModels);
    connect(url_, &QLineEdit::editingFinished, this, &ConnectDialog::listModels);
    if (!initial.url.isEmpty()) listModels();
}

RemoteSettings ConnectDialog::settings() const {
    return {url_->text().trimmed(), key_->text(), model_->currentText().trimmed()};
}

bool ConnectDialog::rememberKey() const {
    return remember_key_->isChecked();
}

void ConnectDialog::listModels() {
    if (url_->text().trimmed().isEmpty()) return;
    const int request = ++request_;
    status_->setText(tr("Asking %1 for its models…").arg(url_->text().trimmed()));
    auto* watcher = new QFutureWatcher<Listing>(this);
    connect(watcher, &QFutureWatcher<Listing>::finished, this, [this, watcher, request] {
        watcher->deleteLater();
        if (request != request_) return;
        const Listing listing = watcher->result();
        if (!listing.error.isEmpty()) {
            status_->setText(listing.error);
            emit modelsListed(false);
            return;
        }
        const QString chosen = model_->currentText();
        model_->clear();
        model_->addItems(listing.models);
        const int keep = model_->findText(chosen);
        if (keep >= 0) model_->setCurrentIndex(keep);
        status_->setText(listing.models.size() == 1
                             ? tr("The server serves 1 model.")
                             : tr("The server serves %1 models.").arg(listing.models.size()));
        emit modelsListed(true);
    });
    // The request may take seconds (a far server, a timeout): never on the GUI thread.
    watcher->setFuture(QtConcurrent::run(list_models, settings()));
}

}  // namespace tokenscope::app
