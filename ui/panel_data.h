#pragma once
// What the inspection panels display, as plain values. The InferenceWorker (app/gui) fills
// these from the engine and sends them to the GUI thread by queued signals; each widget in ui/
// renders exactly the data it is given, so tests can feed known values and check pixels.
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <QVector>
#include <cstdint>
#include <memory>

namespace tokenscope::ui {

struct CandidateData {
    int id = 0;
    QString piece;  // display form: "▁" shown as a space
    float probability = 0.0f;
    float logit = 0.0f;
};

// Where a token came from under speculative decoding (mirrors the engine's TokenOrigin).
enum class TokenOrigin : quint8 {
    Plain,      // an ordinary decode step, or speculation off
    Accepted,   // a proposed token the model accepted: it cost no decode step of its own
    Corrected,  // the model rejected the proposal here and chose this token itself
    Bonus,      // every proposal was accepted; the model's own next token from the same pass
};

// One verification step: what was proposed, how much of it the model accepted, and where it
// disagreed. Shared (by pointer) by every token the step produced.
struct SpeculationStepData {
    int k = 0;                        // tokens asked of the proposer
    QVector<CandidateData> proposed;  // id and piece of each proposal, in order
    int accepted = 0;                 // leading proposals accepted
    int tokens = 0;                   // tokens this step produced (accepted + the model's own)
    double step_ms = 0.0;             // the verification pass
    // Where the model disagreed (id -1 when it accepted everything): the rejected proposal with
    // its probability under the model (p) and under the proposer (q), and the model's choice.
    CandidateData rejected{-1, {}, 0.0f, 0.0f};
    float rejected_q = 0.0f;
    CandidateData target{-1, {}, 0.0f, 0.0f};
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
    TokenOrigin origin = TokenOrigin::Plain;
    std::shared_ptr<const SpeculationStepData> speculation;  // null: not from a verification
    // Empty: the local engine's sampler (before/after the sampling settings). Otherwise where
    // a remote server's alternatives came from ("the server's top_logprobs"): the inspector
    // names that instead, and a NaN logit or an id below 0 means the server did not say.
    QString source;
};

// Speculative decoding as chosen in the sampling panel. It is an engine option: changing it
// reloads the engine (the draft model is loaded with it).
struct SpeculationSettings {
    enum class Mode { Off, Lookup, Draft };
    Mode mode = Mode::Off;
    QString draft_path;  // Draft: the GGUF file (same vocabulary as the chat model)
    int max_k = 8;       // most tokens proposed per step (1 to kMaxK); the engine adapts below it
    static constexpr int kMaxK = 14;  // runtime::kMaxSpeculationK (checked in app/gui)
    friend bool operator==(const SpeculationSettings&, const SpeculationSettings&) = default;
};
// "off", "lookup", "draft": the names QSettings stores.
QString speculationModeName(SpeculationSettings::Mode mode);
SpeculationSettings::Mode speculationModeFromName(const QString& name);

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
    // A remote server's cache. usage_ratio >= 0 with no blocks: only its /metrics' usage gauge
    // is known. remote_note replaces the size formula with what the server does (not) expose.
    double usage_ratio = -1.0;
    QString remote_note;
    // The latest write into the cache (the step just taken): `last_count` tokens from
    // `last_position` of sequence `last_owner`, its last token in slot `last_slot` of block
    // `last_block`. last_block < 0: unknown (nothing written yet, or rolled back).
    int last_block = -1;
    int last_slot = 0;
    int last_position = 0;
    int last_count = 0;
    qint64 last_owner = -1;
};

// Attention weights for one layer and head (or the mean over heads): row q holds the
// weights of query q over keys 0..q (lower triangular); labels are the token texts.
struct AttentionData {
    int layer = 0;
    int head = -1;  // -1: mean over heads
    QStringList labels;
    QVector<QVector<float>> rows;
    // The bytes each position's token decodes to (a token may hold part of a UTF-8
    // character), so the chat can find its messages' text among them; empty when unknown (a
    // remote server), and the labels stand in.
    QVector<QByteArray> pieces;
    // Positions [0, prompt_tokens) are the prompt, the rest the reply's generated tokens, in
    // order; -1 when unknown.
    int prompt_tokens = -1;
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
    // Speculative decoding (all zero when off). decode_tokens_per_s is then the effective rate:
    // every generated token over the decode time, verification passes included.
    bool speculating = false;
    qint64 verifications = 0;
    qint64 proposed = 0;
    qint64 accepted = 0;
    int current_k = 0;            // what the engine will propose next (0: paused)
    double plain_step_ms = 0.0;   // mean one-token decode step (since the model was loaded)
    double verify_step_ms = 0.0;  // mean verification pass of this reply
    double tokens_per_verification = 0.0;  // tokens a verification produced, on average
    quint64 decode_bytes_per_token = 0;    // weights read per decode pass
    double acceptanceRate() const {
        return proposed > 0 ? double(accepted) / double(proposed) : 0.0;
    }
    // What plain decoding runs at on this machine: one token per one-token step.
    double plainTokensPerS() const { return plain_step_ms > 0 ? 1000.0 / plain_step_ms : 0.0; }
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
    qint64 head_dim = 0;
    qint64 embedding_length = 0;
    qint64 vocab_size = 0;
    QString tokenizer;      // "sentencepiece BPE, 262144 tokens"
    QString chat_template;  // "gemma", "fallback", ...
    QString backend;
    quint64 weight_bytes = 0;
    bool supports_thinking = false;  // the chat template reads enable_thinking (Qwen 3)
    // Connected to a server (File › Connect to server…) instead of a local file: path is its URL.
    bool remote = false;
    bool remote_internals = false;  // the server is tokenscope-cli serve: candidates, KV map
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
Q_DECLARE_METATYPE(tokenscope::ui::SpeculationSettings)
