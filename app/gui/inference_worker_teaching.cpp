// The InferenceWorker's teaching commands: step mode (one token per call, the engine paused in
// between without blocking anything) and the attention statistics of the head views.
#include <QThread>
#include <algorithm>
#include <cmath>

#include "inference_worker.h"
#include "model_summary.h"
#include "runtime/engine.h"

namespace tokenscope::app {

namespace {
// A step's attention block and the head grid show at most this many query rows (the newest):
// a 2,000-token prompt would otherwise send heads x 2,000² weights for one picture.
constexpr qint64 kMaxGridRows = 256;
}  // namespace

void InferenceWorker::beginStepping(qint64 conversation, const QVector<ChatTurn>& turns,
                                    const ui::SamplingSettings& settings) {
    begin_reply(conversation, turns, settings, true);
}

void InferenceWorker::stepOnce() {
    if (!reply_ || !reply_->stepped) return;
    try {
        const inspect::AttentionCapture* capture = engine_->capture(current_request_);
        const qint64 rows_before = capture ? capture->rows() : 0;
        const int generated_before = int(reply_->metrics.token_ms.size());
        QElapsedTimer clock;
        clock.start();
        // One token: the first call runs the whole prefill (in chunks of the token budget if the
        // prompt is long) and the step that samples the first token; later calls one decode step.
        int produced = 0;
        while (engine_->has_work() && produced == 0) {
            if (stop_requested_.load()) engine_->cancel(current_request_);
            produced = step_reply();
        }
        const double step_ms = double(clock.nsecsElapsed()) / 1e6;
        capture = engine_->capture(current_request_);
        const qint64 rows_after = capture ? capture->rows() : rows_before;
        if (produced > 0) {
            ui::StepData step;
            step.index = reply_->steps++;
            step.prefill = generated_before == 0;
            const qint64 n = std::max<qint64>(0, rows_after - rows_before);
            for (qint64 p = rows_before; p < rows_after && p < labels_.size(); ++p)
                step.inputs << labels_[p];
            step.attention = head_grid(step_layer_, rows_before, n);
            step.token = reply_->last_token;
            step.settings = reply_->settings;
            step.step_ms = step_ms;
            // Cost from the model's numbers: every layer matrix once per input token (2 FLOPs per
            // weight), the output projection for the one sampled position, and attention: for
            // each query, QK^T and weights x V over the keys it sees (its sliding window on the
            // layers that have one), in every head and layer (inspect::attention_flops, which the
            // bench reports too). Weights are streamed once per step whatever n is.
            step.attention_flops = inspect::attention_flops(engine_->config(), rows_before, n);
            step.flops =
                double(n) * cost_.layer_flops_per_token + cost_.output_flops + step.attention_flops;
            step.weight_bytes = double(cost_.decode_bytes_per_token);
            const ui::KvBlockMapData kv = kv_block_map(*engine_);
            step.kv_read_bytes = double(kv.bytes_per_token) * double(rows_after);
            step.kv_write_bytes = double(kv.bytes_per_token) * double(n);
            step.kv_position = rows_after - 1;
            step.kv_block_size = kv.block_size;
            emit stepTaken(reply_->conversation, step);
        }
        emit metricsChanged(reply_->metrics);
        send_panels(true);
        if (!engine_->has_work()) end_reply();
    } catch (const std::exception& e) {
        fail_reply(QString::fromUtf8(e.what()));
    }
}

ui::HeadGridData InferenceWorker::head_grid(int layer, qint64 first_query, qint64 rows) const {
    ui::HeadGridData grid;
    grid.layer = layer;
    const inspect::AttentionCapture* capture =
        engine_ ? engine_->capture(current_request_) : nullptr;
    if (!capture || layer < 0 || layer >= engine_->config().layers) return grid;
    const qint64 end =
        std::min<qint64>({first_query + rows, qint64(capture->rows()), qint64(labels_.size())});
    first_query = std::max<qint64>({0, first_query, end - kMaxGridRows});
    if (first_query >= end) return grid;
    grid.first_query = int(first_query);
    grid.labels = labels_.mid(0, end);
    const int heads = int(engine_->config().heads);
    grid.heads.resize(heads);
    for (int h = 0; h < heads; ++h) {
        if (!capture->wants(layer, h)) continue;
        grid.heads[h].reserve(end - first_query);
        for (qint64 q = first_query; q < end; ++q) {
            const std::vector<float> row = capture->row(layer, h, q);
            grid.heads[h].push_back(QVector<float>(row.begin(), row.end()));
        }
    }
    return grid;
}

void InferenceWorker::requestStepAttention(int layer, int first_query, int rows) {
    step_layer_ = layer;  // later steps show this layer too
    emit stepAttentionChanged(head_grid(layer, first_query, rows));
}

void InferenceWorker::requestHeadGrid(int layer) {
    const inspect::AttentionCapture* capture =
        engine_ ? engine_->capture(current_request_) : nullptr;
    const qint64 rows = capture ? std::min<qint64>(capture->rows(), labels_.size()) : 0;
    emit headGridChanged(head_grid(layer, rows - kMaxGridRows, kMaxGridRows));
}

void InferenceWorker::requestHeadOverview() {
    const inspect::AttentionCapture* capture =
        engine_ ? engine_->capture(current_request_) : nullptr;
    if (!capture) {
        emit headOverviewChanged({});
        return;
    }
    emit headOverviewChanged(head_statistics_.update(*capture, int(engine_->config().layers),
                                                     int(engine_->config().heads), capture->rows(),
                                                     current_request_));
}

}  // namespace tokenscope::app
