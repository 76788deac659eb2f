#pragma once
// Tools › Quantization lab…: quantize the current model (or any GGUF) to the chosen types, with
// and without an importance matrix, and see what each costs against the original — a table
// (size, bits per weight, perplexity, KL divergence, top-1 agreement, decode speed) and the plot
// of KL divergence against size fill in row by row while a QuantLabJob works on its own thread.
// Any finished row opens as the current model. The right-hand side explains blocks, scales,
// super-blocks and calibration with the current model's numbers.
#include <QDialog>
#include <QThread>

#include "panel_data.h"
#include "quant/quant_eval.h"
#include "quant_lab_job.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableWidget;
class QTabWidget;
class QTextBrowser;

namespace tokenscope::app {

class QuantLabWindow : public QDialog {
    Q_OBJECT
  public:
    explicit QuantLabWindow(QWidget* parent = nullptr);
    ~QuantLabWindow() override;

    // The model in use: the default base, and the numbers of the explanation.
    void setModel(const ui::ModelInfoData& info, qint64 context_tokens);

    // For tests and scripted use: the controls' state as a request, and setters.
    QuantLabRequest request() const;
    void setBase(const QString& path);
    void setTypes(const QStringList& types);
    void setCalibrate(bool on);
    void setOutputDirectory(const QString& dir);
    bool running() const { return running_; }
    // The thread the job runs on. A test that must cancel before the job's first step queues a
    // blocker there first: start() and cancel() race the job thread otherwise.
    QThread* jobThread() { return &thread_; }
    QTableWidget* table() const { return table_; }
    QString explanationHtml() const;
    QImage plot() const;

    // The built-in English sample's halves: the first calibrates, the second measures.
    static QString builtinCalibrationText();
    static QString builtinEvaluationText();

  public slots:
    void start();
    void cancel();

  signals:
    void openModelRequested(const QString& path);
    void runFinished(bool cancelled, const QString& error);

  protected:
    void closeEvent(QCloseEvent* event) override;

  private:
    void build();
    void set_running(bool running);
    void fill_row(int row, const QuantLabRow& data, bool measured);
    void update_open_button();
    QString text_of(const QLineEdit* edit, bool calibration) const;

    QThread thread_;
    QuantLabJob* job_ = nullptr;
    bool running_ = false;

    QLineEdit* base_ = nullptr;
    QList<QCheckBox*> type_boxes_;
    QCheckBox* calibrate_ = nullptr;
    QLineEdit* calibration_file_ = nullptr;
    QLineEdit* eval_file_ = nullptr;
    QLineEdit* out_dir_ = nullptr;
    QPushButton* run_ = nullptr;
    QPushButton* cancel_ = nullptr;
    QPushButton* open_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* status_ = nullptr;
    QTableWidget* table_ = nullptr;
    QLabel* plot_ = nullptr;
    quant::EvalResult plot_data_;  // the base and the rows measured so far
    QTextBrowser* explanation_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    ui::ModelInfoData model_;
    qint64 context_tokens_ = 0;
};

}  // namespace tokenscope::app
