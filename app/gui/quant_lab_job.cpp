#include "quant_lab_job.h"

#include <spdlog/spdlog.h>
#include <QDir>
#include <QFileInfo>
#include <algorithm>
#include <cstring>
#include <exception>

#include "quant/imatrix_run.h"
#include "quant/quant_eval.h"
#include "quant/quantize_model.h"

namespace tokenscope::app {

namespace {

// Thrown from the engine's progress callbacks to unwind a cancelled run.
struct Cancelled {};
// A request the job cannot run (no type chosen, an unknown one), in the user's words.
struct RequestError {
    QString text;
};

}  // namespace

bool imatrix_changes(const QString& type) {
    const QString t = type.toUpper();
    return t != "F32" && t != "F16" && t != "BF16" && t != "Q8_0";
}

QStringList quant_lab_labels(const QuantLabRequest& request) {
    QStringList labels;
    for (const QString& t : request.types) {
        labels << t;
        if (request.calibrate && imatrix_changes(t)) labels << t + " + imatrix";
    }
    return labels;
}

void register_quant_lab_types() {
    qRegisterMetaType<QuantLabRequest>();
    qRegisterMetaType<QuantLabRow>();
}

QuantLabJob::QuantLabJob(QObject* parent) : QObject(parent) {
    register_quant_lab_types();
}

void QuantLabJob::run(const QuantLabRequest& request) {
    const QStringList labels = quant_lab_labels(request);
    emit planned(labels);
    const std::string base = request.base.toStdString();
    const QString stem = QFileInfo(request.base).completeBaseName();
    // Steps for the progress bar: the imatrix run, then a quantization and an evaluation per row.
    const int steps = (request.calibrate ? 1 : 0) + 2 * static_cast<int>(labels.size());
    int step = 0;
    auto percent = [&](double within) {
        return static_cast<int>(100.0 * (step + std::clamp(within, 0.0, 1.0)) / std::max(steps, 1));
    };
    auto check = [this] {
        if (cancel_.load()) throw Cancelled{};
    };
    try {
        if (labels.isEmpty()) throw RequestError{"choose at least one type"};
        QDir().mkpath(request.out_dir);
        quant::Imatrix imatrix;
        bool have_imatrix = false;
        if (request.calibrate && labels.size() > request.types.size()) {
            emit stageChanged(tr("Importance matrix: running the base over the calibration text…"),
                              percent(0));
            quant::ImatrixRunOptions o;
            o.engine.threads = request.threads;
            o.ctx = request.ctx;
            o.dataset = request.calibration_source.toStdString();
            o.progress = [&](const quant::ImatrixProgress& p) {
                check();
                emit stageChanged(tr("Importance matrix: window %1 of %2 (%3 tokens)")
                                      .arg(p.window)
                                      .arg(p.windows)
                                      .arg(p.tokens),
                                  percent(static_cast<double>(p.window) / std::max(p.windows, 1u)));
            };
            imatrix =
                quant::compute_imatrix(base, request.calibration_text.toStdString(), o).imatrix;
            have_imatrix = true;
            ++step;
        }

        bool base_done = false;
        int row = 0;
        for (const QString& type : request.types) {
            const auto target = quant::parse_target(type.toStdString());
            if (!target) throw RequestError{tr("unknown type %1").arg(type)};
            for (int weighted = 0; weighted < 2; ++weighted) {
                if (weighted && !(have_imatrix && imatrix_changes(type))) continue;
                const QString label = labels[row];
                const QString path =
                    QDir(request.out_dir)
                        .filePath(QStringLiteral("%1-%2%3.gguf")
                                      .arg(stem, type, weighted ? "-imatrix" : ""));
                emit stageChanged(tr("Quantizing %1…").arg(label), percent(0));
                quant::QuantizeOptions q;
                q.target = *target;
                q.threads = request.threads;
                if (weighted) {
                    q.imatrix = &imatrix;
                    q.imatrix_path = request.calibration_source.toStdString();
                }
                q.progress = [&](std::size_t i, std::size_t n, const quant::TensorPlan&) {
                    check();
                    emit stageChanged(
                        tr("Quantizing %1: tensor %2 of %3").arg(label).arg(i + 1).arg(n),
                        percent(static_cast<double>(i) / std::max<std::size_t>(n, 1)));
                };
                q.warn = [](const std::string& w) { spdlog::info("quantization lab: {}", w); };
                const auto result = quant::quantize_model(base, path.toStdString(), q);
                ++step;
                QuantLabRow quantized;
                quantized.label = label;
                quantized.eval.path = path.toStdString();
                quantized.eval.file_bytes = result.output_bytes;
                quantized.quantize_seconds = result.seconds;
                emit rowQuantized(row, quantized);

                emit stageChanged(tr("Measuring %1 against the base…").arg(label), percent(0));
                quant::EvalOptions e;
                e.base = base;
                e.models = {path.toStdString()};
                e.text = request.eval_text.toStdString();
                e.ctx = request.ctx;
                e.threads = request.threads;
                e.decode_tokens = request.decode_tokens;
                e.progress = [&](const std::string&) { check(); };
                const quant::EvalResult r = quant::evaluate_quantizations(e);
                ++step;
                if (!base_done) {
                    emit baseEvaluated({tr("base"), r.base, 0.0});
                    base_done = true;
                }
                emit rowEvaluated(row, {label, r.models.at(0), result.seconds});
                ++row;
            }
        }
        emit stageChanged(tr("Done: %1 files in %2").arg(labels.size()).arg(request.out_dir), 100);
        emit finished(false, {});
    } catch (const Cancelled&) {
        emit stageChanged(tr("Cancelled"), percent(0));
        emit finished(true, {});
    } catch (const RequestError& e) {
        emit finished(false, e.text);
    } catch (const std::exception& e) {
        emit finished(false, QString::fromStdString(e.what()));
    }
}

}  // namespace tokenscope::app
