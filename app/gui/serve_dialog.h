#pragma once
// File › Serve this model…: where the OpenAI-compatible server listens. Loopback by default;
// "reachable from other machines" binds every address and then needs an API key (OK stays
// disabled without one, with the reason shown). Remembers its choices (QSettings "serve/...",
// the key only when asked to).
#include <QDialog>

#include "model_server.h"

class QCheckBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace tokenscope::app {

class ServeDialog : public QDialog {
    Q_OBJECT

  public:
    ServeDialog(const QString& model_name, QWidget* parent = nullptr);
    ServeSettings settings() const;
    // Stores the choices for the next time (called when accepted).
    void remember() const;

  private:
    void update_state();

    QCheckBox* public_ = nullptr;
    QSpinBox* port_ = nullptr;
    QLineEdit* key_ = nullptr;
    QCheckBox* remember_key_ = nullptr;
    QSpinBox* parallel_ = nullptr;
    QLabel* note_ = nullptr;
    QDialogButtonBox* buttons_ = nullptr;
};

}  // namespace tokenscope::app
