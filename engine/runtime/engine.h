#pragma once
// The engine facade used by the GUI, the CLI and the API server: load a model, submit
// requests, step, cancel. One scheduler rule covers everything: each sequence has tokens it
// knows and tokens the cache holds (computed); a step hands out at most `token_budget` tokens
// so the second catches up with the first. That is chunked prefill, continuous batching
// (requests join and leave at every step) and multi-turn reuse (a conversation's cache is
// kept, and the next turn prefills only the tokens after the common prefix).
//
// Not thread-safe: one thread owns an Engine (the CLI's main thread, the GUI's worker).
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "inspect/attention_capture.h"
#include "kv/kv_cache_manager.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "runtime/backend.h"
#include "runtime/backend_registry.h"
#include "runtime/gpu_plugin.h"
#include "runtime/sampler.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tokenscope::runtime {

struct EngineOptions {
    int threads = 0;                       // 0: one per hardware thread
    std::int64_t kv_capacity_tokens = 4096;  // cache size, shared by all sequences
    kv::ElementType kv_type = kv::ElementType::F16;
    int kv_block_size = 16;
    std::int64_t token_budget = 512;       // tokens per step (prefill chunk size)
    Device device = Device::Cpu;           // Auto: CUDA when a usable GPU is registered and present
    GpuOptions gpu;                        // CUDA graphs, split-K attention (the bench toggles them)
};

using RequestId = std::int64_t;

struct Request {
    std::vector<std::int32_t> prompt;  // the whole conversation so far, BOS included if wanted
    SamplingParams sampling;
    std::vector<std::string> stop_strings;
    std::vector<std::int32_t> stop_tokens;  // besides the vocabulary's EOS
    int max_tokens = 256;
    // Requests with the same key reuse one cached sequence: the next turn prefills only what
    // differs from the cached tokens. Empty: the cache is freed when the request finishes.
    std::string conversation;
    inspect::CaptureSpec capture;
};

enum class FinishReason { None, Eos, StopToken, StopString, MaxTokens, Cancelled, ContextFull };
const char* finish_reason_name(FinishReason reason);

struct TokenCandidate {
    std::int32_t id = 0;
    std::string piece;  // as the vocabulary spells it ("▁the")
    float probability = 0.0f;
    float logit = 0.0f;  // before: the raw logit; after: the shaped logit the final softmax saw
};

struct Timings {
    std::int64_t prompt_tokens = 0;
    std::int64_t reused_tokens = 0;     // prompt tokens already in the cache
    std::int64_t prefilled_tokens = 0;  // prompt tokens computed for this request
    double prefill_ms = 0.0;            // submit -> first token (time to first token)
    double token_ms = 0.0;              // this token's step
    double decode_ms = 0.0;             // sum of the steps after the first token
    std::int64_t generated_tokens = 0;
};

struct TokenEvent {
    RequestId request = 0;
    std::string text;  // UTF-8-complete delta (may be empty while bytes are pending or held back)
    std::int32_t token = -1;
    std::int64_t position = 0;
    float probability = 0.0f;  // under the shaped distribution it was drawn from
    float logprob = 0.0f;      // under the model's own distribution
    std::vector<TokenCandidate> before, after;
    Timings timings;
    bool finished = false;
    FinishReason reason = FinishReason::None;
};

class Engine {
public:
    // Maps, validates and binds the model; throws tokenscope::Error with a precise message.
    static std::unique_ptr<Engine> load(const std::string& path, const EngineOptions& options = {});
    ~Engine();

    RequestId submit(Request request);
    // Runs one forward step over everything scheduled; returns the tokens it produced (one
    // event per sequence that sampled, plus events for requests that finished without one).
    std::vector<TokenEvent> step();
    void cancel(RequestId id);
    bool has_work() const { return !active_.empty(); }
    // Forgets a conversation's cached sequence (its blocks return to the pool).
    void drop_conversation(const std::string& key);

    const model::ModelConfig& config() const { return config_; }
    const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
    const gguf::File& file() const { return file_; }
    const EngineOptions& options() const { return options_; }
    kv::KvStats kv_stats() const { return kv_->stats(); }
    BackendMemory memory() const { return backend_->memory(); }
    std::string backend_name() const { return backend_->name(); }
    // The attention rows captured for a request (null when it did not ask or is unknown).
    const inspect::AttentionCapture* capture(RequestId id) const;

    // Low-level access for perplexity and benchmarks: runs `batch` as given. The caller
    // allocates slots through kv().
    void forward(const Batch& batch, ForwardOutputs& out) { backend_->forward(batch, *kv_, out); }
    kv::KvCacheManager& kv() { return *kv_; }
    kv::SeqId new_sequence_id() { return next_seq_++; }

private:
    struct Active;
    struct Cached {
        kv::SeqId seq = 0;
        std::vector<std::int32_t> tokens;  // what the cache holds, in order
        std::uint64_t last_used = 0;
        std::shared_ptr<inspect::AttentionCapture> capture;  // carried into the next turn
    };

    Engine(gguf::File file, const EngineOptions& options);
    bool ensure_slots(kv::SeqId seq, int n);
    bool evict_idle_conversation();
    void finish(Active& a, FinishReason reason, TokenEvent& event);
    void sample_scheduled(const Batch& batch, const std::vector<Active*>& scheduled, double step_ms,
                          std::vector<TokenEvent>& events);
    std::string filter_stop_strings(Active& a, std::string text, FinishReason& reason);
    void release(Active& a);

    gguf::File file_;
    EngineOptions options_;
    model::ModelConfig config_;
    model::ModelWeights weights_;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
    std::unique_ptr<kv::KvCacheManager> kv_;
    std::unique_ptr<Backend> backend_;
    std::vector<std::unique_ptr<Active>> active_;
    std::map<std::string, Cached> conversations_;
    std::map<RequestId, std::shared_ptr<inspect::AttentionCapture>> captures_;  // the latest few
    RequestId next_request_ = 1;
    kv::SeqId next_seq_ = 1;
    std::uint64_t clock_ = 0;
    ForwardOutputs outputs_;
};

}  // namespace tokenscope::runtime
