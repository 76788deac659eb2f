#pragma once
// The Quantization window's work, on a thread of its own: optionally an importance matrix of
// the base over a calibration text, then for each chosen type a quantized file (and, with
// calibration, a second one weighted by the importance matrix), each evaluated against the base
// right after it is written (perplexity, KL divergence, top-1 agreement, decode speed), so the
// table and the plot fill in one row at a time. Engine code only (quant/), no GUI.
//
//   QThread thread; auto* job = new QuantLabJob; job->moveToThread(&thread); thread.start();
//   QMetaObject::invokeMethod(job, "run", Qt::QueuedConnection, Q_ARG(QuantLabRequest, r));
//   job->cancel();  // from any thread: stops at the next tensor or window
#include <QObject>
#include <QString>
#include <QStringList>
#include <atomic>

#include "quant/quant_eval.h"

namespace tokenscope::app {

struct QuantLabRequest {
    QString base;                // the model file to quantize and compare against
    QStringList types;           // quantize targets: "Q8_0", "Q4_K_M", ...
    bool calibrate = false;      // also an importance-weighted file for each type it changes
    QString calibration_text;    // the calibration text itself
    QString calibration_source;  // where it came from (recorded in the imatrix)
    QString eval_text;           // the text perplexity and KL are measured on
    QString out_dir;             // where the files go: BASE-TYPE[-imatrix].gguf
    int threads = 1;
    qint64 ctx = 512;
    int decode_tokens = 16;  // greedy decode steps timed per model (0: skip)
};

// One row of the table: a quantized file and what it costs against the base (the engine's
// own measurement; before it is measured only eval.path and eval.file_bytes are set).
struct QuantLabRow {
    QString label;  // "Q4_K_M", "Q4_K_M + imatrix", "base"
    quant::ModelEval eval;
    double quantize_seconds = 0;
};

// The rows a request makes, in order (what planned() announces): each type, and with
// calibration an importance-weighted one after each type the imatrix changes (not F16, BF16,
// F32 or Q8_0, whose rounding it does not touch).
QStringList quant_lab_labels(const QuantLabRequest& request);
bool imatrix_changes(const QString& type);

class QuantLabJob : public QObject {
    Q_OBJECT
  public:
    explicit QuantLabJob(QObject* parent = nullptr);
    // Thread-safe: the running job stops at its next tensor, window or model, deletes what it
    // was writing (quantize writes atomically) and emits finished(true, ...).
    void cancel() { cancel_.store(true); }
    // Thread-safe: clears a cancel; the owner calls it before queueing run() (so a cancel that
    // comes before run() starts is not lost).
    void arm() { cancel_.store(false); }

  public slots:
    void run(const tokenscope::app::QuantLabRequest& request);

  signals:
    void planned(const QStringList& labels);
    // What runs now, and the whole job's progress in percent.
    void stageChanged(const QString& text, int percent);
    void rowQuantized(int row, const tokenscope::app::QuantLabRow& data);
    void baseEvaluated(const tokenscope::app::QuantLabRow& data);
    void rowEvaluated(int row, const tokenscope::app::QuantLabRow& data);
    void finished(bool cancelled, const QString& error);

  private:
    std::atomic<bool> cancel_{false};
};

void register_quant_lab_types();

}  // namespace tokenscope::app

Q_DECLARE_METATYPE(tokenscope::app::QuantLabRequest)
Q_DECLARE_METATYPE(tokenscope::app::QuantLabRow)
