#pragma once
// What the inspection panels display, as plain values. The InferenceWorker (app/gui) fills
// these from the engine and sends them to the GUI thread by queued signals; each widget in ui/
// renders exactly the data it is given, so tests can feed known values and check pixels.
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <QVector>
#include <cstdint>

namespace tokenscope::ui {

struct CandidateData {
    int id = 0;
    QString piece;  // display form: "▁" shown as a space
    float probability = 0.0f;
    float logit = 0.0f;
};

// One generated token: the span the chat view shows and the inspector explains.
struct TokenData {
    int id = -1;
    QString text;                   // the UTF-8-complete text this token added (may be empty)
    float probability = 0.0f;       // under the distribution it was drawn from
    float logprob = 0.0f;           // under the model's own distribution
    QVector<CandidateData> before;  // top candidates before sampling settings: softmax(raw logits)
    QVector<CandidateData> after;  // after sampling settings: penalty/top-k/top-p/min-p/temperature
    double step_ms = 0.0;
};

struct SamplingSettings {
    float temperature = 0.8f;
    int top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    int repeat_window = 64;
    bool fixed_seed = false;
    quint64 seed = 0;
    int max_tokens = 512;
    // For models whose chat template has Qwen 3's enable_thinking switch: let the model write
    // its reasoning (<think>...</think>) before the answer. Ignored by other models.
    bool think = true;
};

struct KvBlockMapData {
    int block_size = 16;
    QVector<qint64> block_owner;  // per block: owning conversation/sequence id, -1 = free
    QVector<int> block_refs;      // per block: reference count (2+ = shared)
    qint64 tokens_used = 0;
    qint64 tokens_capacity = 0;
    quint64 bytes_used = 0;
    quint64 bytes_total = 0;
    // The size formula with this model's numbers.
    int layers = 0;
    int kv_heads = 0;
    int head_dim = 0;
    QString element_type;          // "f16", "q8", "f32"
    double bytes_per_element = 2;  // q8: 1 byte + the per-row scale, shown separately
    quint64 bytes_per_token = 0;
};

// Attention weights for one layer and head (or the mean over heads): row q holds the
// weights of query q over keys 0..q (lower triangular); labels are the token texts.
struct AttentionData {
    int layer = 0;
    int head = -1;  // -1: mean over heads
    QStringList labels;
    QVector<QVector<float>> rows;
};

struct MetricsData {
    double ttft_ms = 0.0;
    double prefill_tokens_per_s = 0.0;
    // Prompt tokens this turn actually computed; prompt_tokens - reused_tokens unless the engine
    // had to recompute part of a cached prefix.
    qint64 prefilled_tokens = 0;
    double decode_tokens_per_s = 0.0;
    QVector<double> token_ms;     // per generated token, most recent last
    double effective_gbps = 0.0;  // decode bytes per token x decode tok/s
    qint64 prompt_tokens = 0;
    qint64 reused_tokens = 0;
};

struct MemoryBudgetData {
    quint64 weights_bytes = 0;
    quint64 kv_cache_bytes = 0;
    quint64 activation_bytes = 0;
    // system_memory::available_bytes() (Linux: MemAvailable) with the model loaded: the
    // quantity `tokenscope-cli inspect` prints as "available RAM". Not adjusted for what the
    // model holds; the view works out the bar's capacity from it.
    quint64 available_ram_bytes = 0;
    quint64 gpu_total_bytes = 0;  // 0 when no GPU backend runs
    quint64 gpu_used_bytes = 0;
};

struct ModelInfoData {
    QString path;
    QString name;
    QString architecture;
    qint64 parameters = 0;
    QStringList tensor_types;  // "Q4_K: 27 tensors, 12.3 MB"
    qint64 context_length = 0;
    qint64 layers = 0;
    qint64 heads = 0;
    qint64 kv_heads = 0;
    qint64 embedding_length = 0;
    qint64 vocab_size = 0;
    QString tokenizer;      // "sentencepiece BPE, 262144 tokens"
    QString chat_template;  // "gemma", "fallback", ...
    QString backend;
    quint64 weight_bytes = 0;
    bool supports_thinking = false;  // the chat template reads enable_thinking (Qwen 3)
};

void register_panel_types();

// The two distributions of a sampling step, named the same in every panel (the sampling panel,
// its chart and the token inspector), so that a learner sees one pair of terms, not five.
// "before sampling settings": softmax of the model's raw logits.
QString beforeSettingsName();
// "after sampling settings": after repetition penalty, top-k, top-p, min-p and temperature.
QString afterSettingsName();
// The one-line explanation of both that each of those panels shows.
QString settingsDistributionsExplanation();

}  // namespace tokenscope::ui

Q_DECLARE_METATYPE(tokenscope::ui::TokenData)
Q_DECLARE_METATYPE(tokenscope::ui::KvBlockMapData)
Q_DECLARE_METATYPE(tokenscope::ui::AttentionData)
Q_DECLARE_METATYPE(tokenscope::ui::MetricsData)
Q_DECLARE_METATYPE(tokenscope::ui::MemoryBudgetData)
Q_DECLARE_METATYPE(tokenscope::ui::ModelInfoData)
Q_DECLARE_METATYPE(tokenscope::ui::SamplingSettings)
