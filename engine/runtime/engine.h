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
#include "model/interleave_weights.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "runtime/backend.h"
#include "runtime/backend_registry.h"
#include "runtime/gpu_plugin.h"
#include "runtime/sampler.h"
#include "runtime/speculation/adaptive_k.h"
#include "runtime/speculation/lookup_proposer.h"
#include "runtime/speculation/token_info.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tokenscope::runtime {

namespace speculation {
class Proposer;
}

// Speculative decoding (runtime/speculation/): a proposer guesses up to k tokens, the target
// checks them in one forward pass (a chunk with every row's logits), the acceptance rule keeps
// the output distribution exactly the target's, and the cache is truncated past the first
// rejected token.
enum class SpeculationMode { Off, Lookup, Draft };
constexpr int kMaxSpeculationK = speculation::kMaxK;

struct SpeculationOptions {
    SpeculationMode mode = SpeculationMode::Off;
    std::string draft_model;  // Draft: the GGUF path (same vocabulary as the target)
    int max_k = 8;            // most tokens proposed per step, 1 to kMaxSpeculationK
    bool adaptive = true;     // false: always propose max_k (tests)
    speculation::LookupOptions lookup;
    speculation::AdaptiveKOptions adaptive_k;
    // The verification cost model until steps have been measured (adaptive_k.h).
    double verify_fixed_cost = 0.5;
    double verify_token_cost = 0.2;
};

// "off", "lookup" or "draft:PATH" (the CLI's --speculative); throws InvalidArgument otherwise.
SpeculationOptions parse_speculation(const std::string& text);
const char* speculation_mode_name(SpeculationMode mode);

struct EngineOptions {
    int threads = 0;                         // 0: one per hardware thread
    std::int64_t kv_capacity_tokens = 4096;  // cache size, shared by all sequences
    kv::ElementType kv_type = kv::ElementType::F16;
    int kv_block_size = 16;
    std::int64_t token_budget = 512;  // tokens per step (prefill chunk size)
    Device device = Device::Cpu;      // Auto: CUDA when a usable GPU is registered and present
    // CPU backend: copy the weights out of the file mapping into 2 MiB pages (where the system
    // offers them), which decode streams 5-11 % faster; where it does not, into ordinary pages
    // when interleave_weights applies to the file, else the mapping stays. false keeps the
    // mapping (no copy, pages shared with the page cache and other processes).
    bool large_pages = true;
    // CPU backend, with large_pages: store the matrices that the CPU kernels multiply faster
    // interleaved (model/interleave_weights.h: Q8_0, Q4_0-Q5_1, Q2_K-Q6_K at the AVX2 level) in
    // that copy. Same memory; a prefill gives the file order's bits (test_forward).
    bool interleave_weights = true;
    GpuOptions gpu;  // CUDA graphs, split-K attention (the bench toggles them)
    SpeculationOptions speculation;
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
    // With EngineOptions::speculation on: false decodes this request plainly (the bench's
    // baseline in the same engine).
    bool speculate = true;
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
    speculation::TokenSpeculation speculation;
};

// What one step() did with each request it holds, for the scheduler's timeline: its slice of
// the step's token budget (a prefill chunk, one decode token, or a speculative verification
// chunk), or why it got none (waiting behind the budget or the KV cache, or preempted: it gave
// its cache back to an older request and will compute its tokens again).
struct ScheduleEntry {
    enum class Kind { Prefill, Decode, Verify, Waiting, Preempted };
    RequestId request = 0;
    Kind kind = Kind::Waiting;
    std::int64_t tokens = 0;  // tokens computed for it in this step (0 when waiting)
};

struct StepSchedule {
    std::int64_t budget = 0;             // EngineOptions::token_budget
    std::vector<ScheduleEntry> entries;  // oldest request first; finished ones are not listed
    std::int64_t scheduled_tokens() const;
};

const char* schedule_kind_name(ScheduleEntry::Kind kind);

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
    // Times a request gave its KV cache back to an older one and computed its tokens again
    // (recompute preemption, when the cache runs out with several requests running).
    std::uint64_t preemptions() const { return preemptions_; }
    // The last step()'s schedule (empty before the first).
    const StepSchedule& last_schedule() const { return last_schedule_; }
    // Forgets a conversation's cached sequence (its blocks return to the pool).
    void drop_conversation(const std::string& key);
    // Runs one forward pass of two tokens and a one-token step through a sequence of its own,
    // then frees it: the first request after load then finds the backend's buffers allocated
    // and its threads and caches warm (SmolLM2 on 2 cores: its time to first token 88-143 ms
    // without, 53-63 with, against 51-63 for later requests). The cache and scheduler are left
    // as they were. Only while no request is active (InvalidArgument otherwise).
    void warm_up();
    // Replaces the speculative decoding setup (off, prompt lookup, another draft model or k)
    // without loading the target again, so cached conversations keep their KV cache and the
    // next turn still prefills only its new tokens. Only between requests (InvalidArgument
    // while any is active); on any error the engine keeps its previous setup.
    void set_speculation(const SpeculationOptions& speculation);

    const model::ModelConfig& config() const { return config_; }
    const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
    const gguf::File& file() const { return file_; }
    // The bound matrices (their layout says which the CPU kernels read interleaved).
    const model::ModelWeights& weights() const { return weights_; }
    // What load stored interleaved (EngineOptions::interleave_weights); zeros when nothing.
    const model::InterleaveResult& interleaved() const { return interleaved_; }
    const EngineOptions& options() const { return options_; }
    kv::KvStats kv_stats() const { return kv_->stats(); }
    BackendMemory memory() const { return backend_->memory(); }
    std::string backend_name() const { return backend_->name(); }
    // The attention rows captured for a request (null when it did not ask or is unknown).
    const inspect::AttentionCapture* capture(RequestId id) const;
    // The same capture, shared: it outlives the engine's short list of recent captures. A
    // finished request's capture no longer changes unless the request had a conversation key
    // (the next turn of that conversation extends it).
    std::shared_ptr<const inspect::AttentionCapture> shared_capture(RequestId id) const;

    // Low-level access for perplexity and benchmarks: runs `batch` as given. The caller
    // allocates slots through kv().
    void forward(const Batch& batch, ForwardOutputs& out) { backend_->forward(batch, *kv_, out); }
    kv::KvCacheManager& kv() { return *kv_; }
    kv::SeqId new_sequence_id() { return next_seq_++; }
    Backend& backend() { return *backend_; }
    // The speculative proposer (null when speculation is off).
    speculation::Proposer* proposer() { return proposer_.get(); }
    // A cached conversation's sequence id, or -1 (tests compare caches).
    kv::SeqId conversation_sequence(const std::string& key) const;

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
    bool preempt_for(Active& a, int n);
    bool evict_idle_conversation();
    void finish(Active& a, FinishReason reason, TokenEvent& event);
    void sample_scheduled(const Batch& batch, const std::vector<Active*>& scheduled, double step_ms,
                          std::vector<TokenEvent>& events);
    // Schedules a's decode step as a verification of proposed tokens when speculation is on
    // and the proposer has a guess; false: schedule it plainly.
    bool schedule_verification(Active& a, std::int64_t budget);
    // Judges the proposals of a verification chunk whose rows start at `row`.
    void verify_scheduled(Active& a, std::int64_t row, double step_ms,
                          std::vector<TokenEvent>& events);
    // Appends a chosen token to the sequence and fills its event; returns why the request
    // finishes with it (None: it goes on).
    FinishReason append_token(Active& a, const SampleResult& s, TokenEvent& e);
    std::string filter_stop_strings(Active& a, std::string text, FinishReason& reason);
    void release(Active& a);
    void record_schedule(const Batch& batch, const std::vector<Active*>& scheduled);

    gguf::File file_;
    EngineOptions options_;
    model::ModelConfig config_;
    model::ModelWeights weights_;
    model::InterleaveResult interleaved_;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
    std::unique_ptr<kv::KvCacheManager> kv_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<speculation::Proposer> proposer_;
    speculation::StepCost step_cost_;  // measured decode/verification step times, all sequences
    std::vector<std::unique_ptr<Active>> active_;
    std::map<std::string, Cached> conversations_;
    std::map<RequestId, std::shared_ptr<inspect::AttentionCapture>> captures_;  // the latest few
    RequestId next_request_ = 1;
    std::uint64_t preemptions_ = 0;
    StepSchedule last_schedule_;
    kv::SeqId next_seq_ = 1;
    std::uint64_t clock_ = 0;
    ForwardOutputs outputs_;
};

}  // namespace tokenscope::runtime
