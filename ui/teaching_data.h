#pragma once
// Plain values for the teaching views (step mode, head grid, head overview), sent by the
// InferenceWorker over queued signals like the types of panel_data.h.
#include <QMetaType>
#include <QStringList>
#include <QVector>

#include "panel_data.h"

namespace tokenscope::ui {

// Every head of one layer over the same query rows: heads[h][r] holds the weights of query
// first_query + r over keys 0..first_query + r.
struct HeadGridData {
    int layer = 0;
    int first_query = 0;
    QStringList labels;  // key tokens 0..first_query + rows - 1
    QVector<QVector<QVector<float>>> heads;
    int rows() const { return heads.isEmpty() ? 0 : int(heads.front().size()); }
    int keys() const { return first_query + rows(); }
};

// One step of step mode: the tokens that went through the model, the chosen layer's attention
// for them (every head), the candidates before and after the sampling settings, the sampled
// token, and what the step cost by the model's numbers.
struct StepData {
    int index = 0;         // 0 = the first step of the reply (the prefill)
    bool prefill = false;  // true: the prompt's n tokens at once (an n x n block)
    QStringList inputs;    // the tokens fed through the model in this step
    HeadGridData attention;
    TokenData token;  // the sampled token, with its candidates
    SamplingSettings settings;
    // Cost, from inspect::model_cost and the KV cache layout (not measured):
    double flops = 0;            // layer matrices x inputs + output projection + attention
    double attention_flops = 0;  // the QK^T and weights x V part of flops
    double weight_bytes = 0;     // every layer matrix read once per step
    double kv_read_bytes = 0;    // the cache read by the step's attention
    double kv_write_bytes = 0;   // the new rows written
    double step_ms = 0;          // measured
    qint64 kv_position = 0;      // the last slot written (position of the last input)
    int kv_block_size = 16;
};

// Per layer and head, statistics of the captured attention rows of the current reply.
struct HeadOverviewData {
    int layers = 0;
    int heads = 0;
    int rows = 0;             // query rows the statistics cover
    QVector<float> entropy;   // [layer * heads + head]: mean row entropy in bits
    QVector<float> distance;  // mean sum_k w_k (q - k): how far back a head looks
};

void register_teaching_types();

}  // namespace tokenscope::ui

Q_DECLARE_METATYPE(tokenscope::ui::HeadGridData)
Q_DECLARE_METATYPE(tokenscope::ui::StepData)
Q_DECLARE_METATYPE(tokenscope::ui::HeadOverviewData)
