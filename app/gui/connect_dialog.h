#pragma once
// File › Connect to server…: the server's URL, an optional API key and the model, picked from
// what the server lists (GET /v1/models, fetched off the GUI thread). The caller remembers
// the choice in QSettings and hands it to the worker.
#include <QDialog>

#include "inference_worker.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace tokenscope::app {

class ConnectDialog : public QDialog {
    Q_OBJECT

  public:
    ConnectDialog(const RemoteSettings& initial, bool remember_key, QWidget* parent = nullptr);

    RemoteSettings settings() const;
    bool rememberKey() const;
    QComboBox* modelBox() const { return model_; }
    QLabel* statusLabel() const { return status_; }

  public slots:
    // Asks the server for its models; the list fills in (or the status says why not) when done.
    void listModels();

  signals:
    void modelsListed(bool ok);

  private:
    QLineEdit* url_ = nullptr;
    QLineEdit* key_ = nullptr;
    QCheckBox* remember_key_ = nullptr;
    QComboBox* model_ = nullptr;
    QPushButton* list_ = nullptr;
    QLabel* status_ = nullptr;
    int request_ = 0;  // only the newest listing's answer is shown
};

}  // namespace tokenscope::app
