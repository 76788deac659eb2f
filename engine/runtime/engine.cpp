#include "runtime/engine.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <spdlog/spdlog.h>

#include "model/interleave_weights.h"
#include "runtime/cpu_backend.h"
#include "runtime/speculation/acceptance.h"
#include "runtime/speculation/draft_proposer.h"
#include "tensor/matmul.h"
#include "util/error.h"

namespace tokenscope::runtime {

// See speculation::kMaxK: a verification chunk must stay on the kernels that equal decode.
static_assert(kMaxSpeculationK + 1 < tensor::kPanelMinTokens);

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t kKeptCaptures = 32;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}
}  // namespace

struct Engine::Active {
    RequestId id = 0;
    Request request;
    kv::SeqId seq = 0;
    std::vector<std::int32_t> tokens;  // prompt + generated
    std::int64_t computed = 0;         // tokens the cache holds
    std::int64_t prompt_size = 0;
    std::int64_t generated = 0;
    Sampler sampler;
    tokenizer::StreamingDetokenizer detokenizer;
    std::string held_back;  // text that might be the start of a stop string
    std::shared_ptr<inspect::AttentionCapture> capture;
    Timings timings;
    Clock::time_point submitted = Clock::now();
    bool cancelled = false;  // asked by cancel(); acted on at the next step
    bool done = false;       // finished and released; removed at the end of the step
    // Speculation (engaged when the engine speculates and the request allows it).
    std::optional<speculation::AdaptiveK> k_control;
    speculation::Stats spec_stats;
    speculation::Proposal proposal;          // this step's, empty for a plain step
    std::vector<std::int32_t> verify_chunk;  // [last sampled token, proposals...]
    int asked_k = 0;
    bool preempted = false;  // gave its cache back in this step: not scheduled again in it

    Active(Request r, const tokenizer::Tokenizer& tok)
        : request(std::move(r)), sampler(request.sampling), detokenizer(tok) {}
};

const char* speculation_mode_name(SpeculationMode mode) {
    switch (mode) {
        case SpeculationMode::Off:
            return "off";
        case SpeculationMode::Lookup:
            return "lookup";
        case SpeculationMode::Draft:
            return "draft";
    }
    return "unknown";
}

SpeculationOptions parse_speculation(const std::string& text) {
    SpeculationOptions o;
    if (text == "off") return o;
    if (text == "lookup") {
        o.mode = SpeculationMode::Lookup;
        return o;
    }
    if (text.rfind("draft:", 0) == 0 && text.size() > 6) {
        o.mode = SpeculationMode::Draft;
        o.draft_model = text.substr(6);
        return o;
    }
    throw InvalidArgument("speculation must be off, lookup or draft:PATH, got '" + text + "'");
}

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::None:
            return "none";
        case FinishReason::Eos:
            return "eos";
        case FinishReason::StopToken:
            return "stop_token";
        case FinishReason::StopString:
            return "stop_string";
        case FinishReason::MaxTokens:
            return "max_tokens";
        case FinishReason::Cancelled:
            return "cancelled";
        case FinishReason::ContextFull:
            return "context_full";
    }
    return "unknown";
}

namespace {
// The GPU backend the options ask for and this machine can run, or null for the CPU.
const GpuBackendFactory* choose_gpu(const EngineOptions& options) {
    if (options.device == Device::Cpu) return nullptr;
    std::string reason;
    const GpuBackendFactory* gpu = registered_gpu_backend(&reason);
    if (gpu) reason = gpu->unavailable_reason();
    if (reason.empty()) return gpu;
    if (options.device == Device::Cuda) throw Error("--device cuda: " + reason);
    spdlog::info("device auto: using the CPU ({})", reason);
    return nullptr;
}

std::unique_ptr<Backend> create_backend(const GpuBackendFactory* gpu,
                                        const model::ModelConfig& config,
                                        const model::ModelWeights& weights,
                                        const kv::CacheShape& shape, const EngineOptions& options) {
    if (gpu) return gpu->create(config, weights, shape, options.gpu);
    return std::make_unique<CpuBackend>(config, weights, shape, options.threads);
}
}  // namespace

namespace {

void validate_speculation(const SpeculationOptions& spec) {
    if (spec.mode != SpeculationMode::Off && (spec.max_k < 1 || spec.max_k > kMaxSpeculationK)) {
        throw InvalidArgument("speculation: k = " + std::to_string(spec.max_k) +
                              " is out of range (1 to " + std::to_string(kMaxSpeculationK) + ")");
    }
    if (spec.mode == SpeculationMode::Lookup &&
        (spec.lookup.min_ngram < 1 || spec.lookup.max_ngram < spec.lookup.min_ngram)) {
        throw InvalidArgument("speculation: prompt lookup needs 1 <= min n-gram <= max n-gram");
    }
}

// The proposer `options.speculation` asks for (null when off). A draft model is loaded here and
// checked against the target's vocabulary.
std::unique_ptr<speculation::Proposer> make_proposer(const EngineOptions& options,
                                                     const tokenizer::Tokenizer& target) {
    const SpeculationOptions& spec = options.speculation;
    if (spec.mode == SpeculationMode::Lookup)
        return std::make_unique<speculation::LookupProposer>(spec.lookup);
    if (spec.mode == SpeculationMode::Draft) {
        return std::make_unique<speculation::DraftProposer>(spec.draft_model, options, target);
    }
    return nullptr;
}

}  // namespace

Engine::Engine(gguf::File file, const EngineOptions& options)
    : file_(std::move(file)), options_(options) {}

Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::load(const std::string& path, const EngineOptions& options) {
    if (options.kv_capacity_tokens <= 0 || options.token_budget <= 0 ||
        options.kv_block_size <= 0) {
        throw InvalidArgument(
            "engine options: kv capacity, token budget and block size must be positive");
    }
    validate_speculation(options.speculation);
    const auto start = Clock::now();
    const GpuBackendFactory* gpu = choose_gpu(options);
    // The CPU streams its weights from large pages faster; a GPU copies them to the device
    // once, so its host copy may stay a mapping.
    const gguf::FileBytes where =
        !gpu && options.large_pages ? gguf::FileBytes::LargePages : gguf::FileBytes::Mapped;
    std::unique_ptr<Engine> engine(new Engine(gguf::File::open(path, where), options));
    Engine& e = *engine;
    e.config_ = model::load_model_config(e.file_);
    e.weights_ = model::bind_weights(e.file_, e.config_);
    if (!gpu && options.interleave_weights) {
        // Without large pages (Windows, THP "never") the file stays a mapping; the interleaved
        // layout still pays there (246M Q4_K decode on one thread 107 -> 130 tok/s on the Zen 3
        // dev machine, benchmarks.md, twenty-fourth pass), so the weights get a copy in ordinary
        // pages to hold it.
        if (options.large_pages && !e.file_.is_private_copy() &&
            model::interleaving_applies(e.weights_) && e.file_.copy_out_of_mapping()) {
            e.weights_ = model::bind_weights(e.file_, e.config_);
        }
        e.interleaved_ = model::interleave_weights(e.file_, e.weights_);
        const model::InterleaveResult& moved = e.interleaved_;
        if (moved.matrices > 0) {
            spdlog::info(
                "{}: {} matrices ({:.0f} MiB) stored interleaved for the CPU kernels in "
                "{:.0f} ms",
                path, moved.matrices, static_cast<double>(moved.bytes) / (1 << 20), moved.ms);
        }
    }
    e.tokenizer_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(e.file_));
    if (e.tokenizer_->vocab_size() != e.config_.vocab_size) {
        throw FormatError(
            path + ": the vocabulary has " + std::to_string(e.tokenizer_->vocab_size()) +
            " tokens but token_embd.weight has " + std::to_string(e.config_.vocab_size) + " rows");
    }
    kv::CacheShape shape;
    shape.layers = static_cast<int>(e.config_.layers);
    shape.kv_heads = static_cast<int>(e.config_.kv_heads);
    shape.head_dim = static_cast<int>(e.config_.head_dim);
    shape.block_size = options.kv_block_size;
    shape.num_blocks = static_cast<int>((options.kv_capacity_tokens + options.kv_block_size - 1) /
                                        options.kv_block_size);
    shape.type = options.kv_type;
    e.kv_ = std::make_unique<kv::KvCacheManager>(shape);
    e.backend_ = create_backend(gpu, e.config_, e.weights_, shape, options);
    e.proposer_ = make_proposer(options, *e.tokenizer_);
    e.step_cost_ = speculation::StepCost(options.speculation.verify_fixed_cost,
                                         options.speculation.verify_token_cost);
    spdlog::info("loaded {} ({}, {} layers, width {}, vocab {}) in {:.0f} ms; {}", path,
                 e.config_.architecture, e.config_.layers, e.config_.embedding_length,
                 e.config_.vocab_size, ms_since(start), e.backend_->name());
    return engine;
}

RequestId Engine::submit(Request request) {
    request.sampling.validate();
    if (request.prompt.empty()) throw InvalidArgument("request: the prompt has no tokens");
    if (request.max_tokens < 0) throw InvalidArgument("request: max_tokens is negative");
    for (std::int32_t t : request.prompt) {
        if (t < 0 || t >= config_.vocab_size) {
            throw InvalidArgument("request: token id " + std::to_string(t) +
                                  " out of range (vocabulary has " +
                                  std::to_string(config_.vocab_size) + ")");
        }
    }
    auto a = std::make_unique<Active>(std::move(request), *tokenizer_);
    a->id = next_request_++;
    a->tokens = a->request.prompt;
    a->prompt_size = static_cast<std::int64_t>(a->tokens.size());
    a->timings.prompt_tokens = a->prompt_size;

    // Multi-turn reuse: keep the longest common prefix of the cached conversation, but always
    // recompute at least the last prompt token (its logits pick the first new token).
    auto cached = a->request.conversation.empty() ? conversations_.end()
                                                  : conversations_.find(a->request.conversation);
    if (cached != conversations_.end()) {
        for (const auto& other : active_) {
            if (other->request.conversation == a->request.conversation) {
                throw InvalidArgument("request: conversation '" + a->request.conversation +
                                      "' is already generating");
            }
        }
        Cached& c = cached->second;
        std::size_t common = 0;
        const std::size_t limit = std::min(c.tokens.size(), a->tokens.size() - 1);
        while (common < limit && c.tokens[common] == a->tokens[common]) ++common;
        kv_->truncate(c.seq, static_cast<int>(common));
        a->seq = c.seq;
        a->computed = static_cast<std::int64_t>(common);
        a->capture = std::move(c.capture);
        conversations_.erase(cached);
    } else {
        a->seq = next_seq_++;
    }
    a->timings.reused_tokens = a->computed;
    if (proposer_ && a->request.speculate)
        a->k_control.emplace(options_.speculation.max_k, options_.speculation.adaptive_k);
    if (a->request.capture.enabled) {
        if (!a->capture || a->capture->spec().layers != a->request.capture.layers ||
            a->capture->spec().heads != a->request.capture.heads ||
            a->capture->spec().max_context != a->request.capture.max_context) {
            a->capture = std::make_shared<inspect::AttentionCapture>(
                a->request.capture, static_cast<int>(config_.layers),
                static_cast<int>(config_.heads));
        }
    } else {
        a->capture.reset();
    }
    if (a->capture) {
        captures_[a->id] = a->capture;
        while (captures_.size() > kKeptCaptures) captures_.erase(captures_.begin());
    }
    const RequestId id = a->id;
    active_.push_back(std::move(a));
    return id;
}

void Engine::cancel(RequestId id) {
    for (auto& a : active_) {
        if (a->id == id) a->cancelled = true;
    }
}

const inspect::AttentionCapture* Engine::capture(RequestId id) const {
    return shared_capture(id).get();
}

std::shared_ptr<const inspect::AttentionCapture> Engine::shared_capture(RequestId id) const {
    auto it = captures_.find(id);
    return it == captures_.end() ? nullptr : it->second;
}

kv::SeqId Engine::conversation_sequence(const std::string& key) const {
    const auto it = conversations_.find(key);
    return it == conversations_.end() ? -1 : it->second.seq;
}

void Engine::drop_conversation(const std::string& key) {
    auto it = conversations_.find(key);
    if (it == conversations_.end()) return;
    if (kv_->has_sequence(it->second.seq)) kv_->free_sequence(it->second.seq);
    conversations_.erase(it);
}

void Engine::warm_up() {
    if (!active_.empty()) {
        throw InvalidArgument("warm_up: " + std::to_string(active_.size()) +
                              " request(s) are running");
    }
    // Token 0 exists in every vocabulary; only the work matters, not what it computes.
    const std::array<std::int32_t, 3> tokens = {0, 0, 0};
    // The next request's id, borrowed: the sequence is freed before that request exists, and
    // the KV view then numbers the user's sequences as if there had been no warm-up.
    const kv::SeqId seq = next_seq_;
    if (!kv_->allocate_slots(seq, 2)) return;  // no room: nothing to warm, nothing changed
    ForwardOutputs out;
    try {
        Batch prefill;
        prefill.chunks.push_back({seq, std::span(tokens).first(2), 0, LogitsWanted::Last, nullptr});
        backend_->forward(prefill, *kv_, out);
        if (kv_->allocate_slots(seq, 1)) {
            Batch decode;
            decode.chunks.push_back(
                {seq, std::span(tokens).last(1), 2, LogitsWanted::Last, nullptr});
            backend_->forward(decode, *kv_, out);
        }
    } catch (...) {
        kv_->free_sequence(seq);
        throw;
    }
    kv_->free_sequence(seq);
}

void Engine::set_speculation(const SpeculationOptions& speculation) {
    if (!active_.empty()) {
        throw InvalidArgument("speculation: cannot change it while " +
                              std::to_string(active_.size()) + " request(s) are running");
    }
    validate_speculation(speculation);
    EngineOptions options = options_;
    options.speculation = speculation;
    // Built before anything changes: a draft that fails to load leaves the old setup in place.
    auto proposer = make_proposer(options, *tokenizer_);
    proposer_ = std::move(proposer);
    options_ = std::move(options);
    step_cost_ =
        speculation::StepCost(speculation.verify_fixed_cost, speculation.verify_token_cost);
}

bool Engine::evict_idle_conversation() {
    if (conversations_.empty()) return false;
    auto oldest = std::min_element(
        conversations_.begin(), conversations_.end(),
        [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
    spdlog::debug("engine: evicting idle conversation '{}' to free KV blocks", oldest->first);
    drop_conversation(oldest->first);
    return true;
}

bool Engine::ensure_slots(kv::SeqId seq, int n) {
    for (;;) {
        if (kv_->blocks_needed(seq, n) <= kv_->pool().num_free())
            return kv_->allocate_slots(seq, n);
        if (!evict_idle_conversation()) return false;
    }
}

void Engine::release(Active& a) {
    // A draft's cache is not kept across turns: the next turn feeds the draft the whole
    // conversation again (the draft is small; keeping it would need its own eviction).
    if (proposer_) proposer_->release(a.seq);
    if (!kv_->has_sequence(a.seq)) return;
    if (a.request.conversation.empty()) {
        kv_->free_sequence(a.seq);
        return;
    }
    // Keep the cache for the next turn: it holds tokens [0, computed).
    Cached c;
    c.seq = a.seq;
    c.tokens.assign(a.tokens.begin(), a.tokens.begin() + a.computed);
    c.last_used = ++clock_;
    c.capture = a.capture;
    conversations_[a.request.conversation] = std::move(c);
}

void Engine::finish(Active& a, FinishReason reason, TokenEvent& event) {
    a.done = true;
    event.finished = true;
    event.reason = reason;
    // Whatever the detokenizer and the stop-string filter still hold belongs to the answer.
    if (reason != FinishReason::StopString) event.text += a.held_back + a.detokenizer.flush();
    a.held_back.clear();
    release(a);
}

std::vector<TokenEvent> Engine::step() {
    std::vector<TokenEvent> events;
    const auto step_start = Clock::now();
    auto finish_now = [&](Active& a, FinishReason reason) {
        TokenEvent e;
        e.request = a.id;
        e.timings = a.timings;
        finish(a, reason, e);
        events.push_back(std::move(e));
    };

    // Cancelled requests and ones past the model's context finish before scheduling.
    for (auto& ptr : active_) {
        if (ptr->cancelled) {
            finish_now(*ptr, FinishReason::Cancelled);
        } else if (static_cast<std::int64_t>(ptr->tokens.size()) > config_.context_length) {
            finish_now(*ptr, FinishReason::ContextFull);
        }
    }

    // Schedule: hand out tokens within the budget, oldest request first.
    Batch batch;
    std::vector<Active*> scheduled;
    std::int64_t budget = options_.token_budget;
    for (auto& ptr : active_) ptr->preempted = false;
    for (auto& ptr : active_) {
        Active& a = *ptr;
        if (a.done || a.preempted) continue;
        const std::int64_t remaining = static_cast<std::int64_t>(a.tokens.size()) - a.computed;
        const int n = static_cast<int>(std::min(remaining, budget));
        if (n <= 0) continue;
        if (remaining == 1 && schedule_verification(a, budget)) {
            SeqChunk chunk;
            chunk.seq = a.seq;
            chunk.tokens = a.verify_chunk;
            chunk.start_pos = a.computed;
            chunk.logits = LogitsWanted::All;
            chunk.capture = a.capture.get();
            batch.chunks.push_back(chunk);
            scheduled.push_back(&a);
            budget -= static_cast<std::int64_t>(a.verify_chunk.size());
            if (budget == 0) break;
            continue;
        }
        if (!ensure_slots(a.seq, n) && !preempt_for(a, n)) {
            if (!scheduled.empty()) break;  // wait until others finish and free blocks
            spdlog::warn("engine: request {} needs more KV cache than exists ({} tokens)", a.id,
                         options_.kv_capacity_tokens);
            finish_now(a, FinishReason::ContextFull);
            continue;
        }
        SeqChunk chunk;
        chunk.seq = a.seq;
        chunk.tokens = std::span<const std::int32_t>(a.tokens.data() + a.computed,
                                                     static_cast<std::size_t>(n));
        chunk.start_pos = a.computed;
        chunk.logits = a.computed + n == static_cast<std::int64_t>(a.tokens.size())
                           ? LogitsWanted::Last
                           : LogitsWanted::None;
        chunk.capture = a.capture.get();
        batch.chunks.push_back(chunk);
        scheduled.push_back(&a);
        if (a.generated == 0) a.timings.prefilled_tokens += n;
        budget -= n;
        if (budget == 0) break;
    }
    record_schedule(batch, scheduled);
    if (!batch.chunks.empty()) {
        backend_->forward(batch, *kv_, outputs_);
        sample_scheduled(batch, scheduled, ms_since(step_start), events);
        // Decode and verification steps teach the cost model what a verification costs.
        const bool decode_only =
            std::all_of(batch.chunks.begin(), batch.chunks.end(), [](const SeqChunk& c) {
                return c.logits == LogitsWanted::All || c.tokens.size() == 1;
            });
        if (proposer_ && decode_only)
            step_cost_.record(static_cast<int>(batch.total_tokens()), ms_since(step_start));
    }
    std::erase_if(active_, [](const auto& a) { return a->done; });
    return events;
}

void Engine::record_schedule(const Batch& batch, const std::vector<Active*>& scheduled) {
    last_schedule_.budget = options_.token_budget;
    last_schedule_.entries.clear();
    for (const auto& ptr : active_) {
        const Active& a = *ptr;
        if (a.done) continue;
        ScheduleEntry e;
        e.request = a.id;
        const auto at = std::find(scheduled.begin(), scheduled.end(), &a);
        if (at != scheduled.end()) {
            const SeqChunk& chunk = batch.chunks[static_cast<std::size_t>(at - scheduled.begin())];
            e.tokens = static_cast<std::int64_t>(chunk.tokens.size());
            if (chunk.logits == LogitsWanted::All) {
                e.kind = ScheduleEntry::Kind::Verify;
            } else if (a.generated > 0 && e.tokens == 1) {
                e.kind = ScheduleEntry::Kind::Decode;
            } else {
                e.kind = ScheduleEntry::Kind::Prefill;  // a prompt, or a preempted one's recompute
            }
        } else {
            e.kind = a.preempted ? ScheduleEntry::Kind::Preempted : ScheduleEntry::Kind::Waiting;
        }
        last_schedule_.entries.push_back(e);
    }
}

std::int64_t StepSchedule::scheduled_tokens() const {
    std::int64_t n = 0;
    for (const auto& e : entries) n += e.tokens;
    return n;
}

const char* schedule_kind_name(ScheduleEntry::Kind kind) {
    switch (kind) {
        case ScheduleEntry::Kind::Prefill:
            return "prefill";
        case ScheduleEntry::Kind::Decode:
            return "decode";
        case ScheduleEntry::Kind::Verify:
            return "verify";
        case ScheduleEntry::Kind::Waiting:
            return "waiting";
        case ScheduleEntry::Kind::Preempted:
            return "preempted";
    }
    return "?";
}

// Recompute preemption (vLLM's): when the oldest requests need KV blocks that younger ones
// hold, the youngest gives its blocks back and later computes its tokens (prompt and what it
// generated so far) again, instead of `a` being cut short with context_full. Requests are
// scheduled oldest first, so the victims (younger than `a`) have nothing scheduled in this step
// yet. A request with an attention capture is not preempted (its rows would be recorded twice).
// Returns whether `a` then got its n slots.
bool Engine::preempt_for(Active& a, int n) {
    auto self =
        std::find_if(active_.begin(), active_.end(), [&](const auto& p) { return p.get() == &a; });
    if (self == active_.end()) return false;
    for (auto it = active_.end(); it != self + 1;) {
        --it;
        Active& victim = **it;
        if (victim.done || victim.computed == 0 || victim.capture) continue;
        spdlog::info(
            "engine: request {} gives back its KV cache ({} tokens) for request {}; it will "
            "compute them again",
            victim.id, victim.computed, a.id);
        kv_->truncate(victim.seq, 0);
        victim.computed = 0;
        victim.preempted = true;
        ++preemptions_;
        if (ensure_slots(a.seq, n)) return true;
    }
    return false;
}

bool Engine::schedule_verification(Active& a, std::int64_t budget) {
    a.proposal.clear();
    a.asked_k = 0;
    if (!a.k_control || a.generated == 0) return false;
    // Every proposal accepted yields k + 1 tokens: stay within max_tokens, the step's budget and
    // the model's context (the chunk writes positions up to size - 1 + k).
    const std::int64_t room =
        std::min({static_cast<std::int64_t>(a.request.max_tokens) - a.generated - 1, budget - 1,
                  config_.context_length - static_cast<std::int64_t>(a.tokens.size())});
    const int wanted = options_.speculation.adaptive ? a.k_control->next_k(step_cost_)
                                                     : options_.speculation.max_k;
    const int k = static_cast<int>(std::min<std::int64_t>(wanted, room));
    if (k <= 0) return false;
    a.asked_k = k;
    proposer_->propose(a.seq, a.tokens, k, a.request.sampling, a.proposal);
    if (a.proposal.tokens.empty()) return false;
    a.verify_chunk.assign(1, a.tokens.back());
    a.verify_chunk.insert(a.verify_chunk.end(), a.proposal.tokens.begin(), a.proposal.tokens.end());
    if (!ensure_slots(a.seq, static_cast<int>(a.verify_chunk.size()))) {
        a.proposal.clear();  // the cache is short: decode plainly, which may still fit
        return false;
    }
    return true;
}

FinishReason Engine::append_token(Active& a, const SampleResult& s, TokenEvent& e) {
    e.request = a.id;
    e.token = s.token;
    e.position = static_cast<std::int64_t>(a.tokens.size());
    e.probability = s.probability;
    e.logprob = s.model_logprob;
    for (const auto& c : s.before)
        e.before.push_back({c.id, tokenizer_->piece(c.id), c.probability, c.logit});
    for (const auto& c : s.after)
        e.after.push_back({c.id, tokenizer_->piece(c.id), c.probability, c.logit});
    a.tokens.push_back(s.token);
    ++a.generated;
    a.timings.generated_tokens = a.generated;

    FinishReason reason = FinishReason::None;
    const auto& stops = a.request.stop_tokens;
    if (s.token == tokenizer_->eos_id()) {
        reason = FinishReason::Eos;
    } else if (std::find(stops.begin(), stops.end(), s.token) != stops.end()) {
        reason = FinishReason::StopToken;
    } else {
        e.text = filter_stop_strings(a, a.held_back + a.detokenizer.push(s.token), reason);
        if (reason == FinishReason::None && a.generated >= a.request.max_tokens)
            reason = FinishReason::MaxTokens;
    }
    e.timings = a.timings;
    e.speculation.enabled = a.k_control.has_value();
    return reason;
}

void Engine::sample_scheduled(const Batch& batch, const std::vector<Active*>& scheduled,
                              double step_ms, std::vector<TokenEvent>& events) {
    for (std::size_t ci = 0; ci < scheduled.size(); ++ci) {
        Active& a = *scheduled[ci];
        if (!a.proposal.tokens.empty()) {
            verify_scheduled(a, outputs_.first_row[ci], step_ms, events);
            continue;
        }
        a.computed += static_cast<std::int64_t>(batch.chunks[ci].tokens.size());
        if (outputs_.first_row[ci] < 0) continue;  // a prefill chunk short of the prompt's end
        const SampleResult s = a.sampler.sample(outputs_.row(outputs_.first_row[ci]), a.tokens);
        if (a.generated == 0) {
            a.timings.prefill_ms = ms_since(a.submitted);
        } else {
            a.timings.decode_ms += step_ms;
        }
        a.timings.token_ms = step_ms;
        TokenEvent e;
        const FinishReason reason = append_token(a, s, e);
        if (a.k_control) {
            a.spec_stats.current_k = a.k_control->best_k(step_cost_);
            a.spec_stats.rate = a.k_control->rate();
            e.speculation.stats = a.spec_stats;
        }
        // The sampled token has not been through the model: the cache holds [0, computed).
        if (reason != FinishReason::None) finish(a, reason, e);
        events.push_back(std::move(e));
    }
}

void Engine::verify_scheduled(Active& a, std::int64_t row, double step_ms,
                              std::vector<TokenEvent>& events) {
    const auto& proposed = a.proposal.tokens;
    const auto n = static_cast<int>(proposed.size());
    auto verification = std::make_shared<speculation::Verification>();
    verification->k = a.asked_k;
    verification->proposed = proposed;
    a.timings.decode_ms += step_ms;
    a.timings.token_ms = step_ms;

    // Row i holds the target's logits after chunk token i, i.e. its distribution for the
    // position of proposal i (the last row: for the token after every proposal).
    std::vector<TokenEvent> step_events;
    FinishReason reason = FinishReason::None;
    int accepted = 0;
    int judged = 0;  // up to and including the first rejection, or until the request finished
    for (int i = 0; i <= n && reason == FinishReason::None; ++i) {
        const sampling::CandidateSet& p = a.sampler.shape(outputs_.row(row + i), a.tokens);
        std::int32_t token = -1;
        speculation::TokenOrigin origin = speculation::TokenOrigin::Bonus;
        if (i < n) {
            const std::span<const sampling::TokenLogit> q =
                a.proposal.q.empty() ? std::span<const sampling::TokenLogit>{}
                                     : a.proposal.q[static_cast<std::size_t>(i)];
            const double u_accept = a.sampler.next_uniform();
            const double u_resample = a.sampler.next_uniform();
            ++judged;
            const speculation::Verdict v = speculation::judge(
                p.items, q, proposed[static_cast<std::size_t>(i)], u_accept, u_resample);
            token = v.token;
            if (v.accepted) {
                origin = speculation::TokenOrigin::Accepted;
                ++accepted;
            } else {
                origin = speculation::TokenOrigin::Corrected;
                verification->rejected_token = proposed[static_cast<std::size_t>(i)];
                verification->rejected_p = v.p_proposed;
                verification->rejected_q = v.q_proposed;
                verification->target_token = v.token;
                verification->target_p = v.p_token;
            }
        } else {
            token = a.sampler.params().temperature == 0.0f
                        ? p.items.front().id
                        : p.items[sampling::draw(p, a.sampler.next_uniform())].id;
        }
        TokenEvent e;
        reason = append_token(a, a.sampler.result_for(token), e);
        e.speculation.origin = origin;
        step_events.push_back(std::move(e));
        if (origin == speculation::TokenOrigin::Corrected) break;
    }
    verification->accepted = accepted;

    // The cache holds the chunk's tokens up to the last accepted proposal: everything the
    // sequence now has but its newest token. The rest (rejected or never judged) is dropped,
    // which leaves the bookkeeping as if it had never been proposed; those slots are written
    // again before anything reads them.
    a.computed = static_cast<std::int64_t>(a.tokens.size()) - 1;
    kv_->truncate(a.seq, static_cast<int>(a.computed));
    // The capture drops the rows of the dropped tokens too: until the next step rewrote them,
    // the newest token's position showed the row of the proposal it replaced.
    if (a.capture) a.capture->prepare_rows(a.computed);
    proposer_->accept(
        a.seq, std::span<const std::int32_t>(a.tokens).first(static_cast<std::size_t>(a.computed)));
    a.k_control->record(judged, accepted);
    ++a.spec_stats.verifications;
    // Proposals after a rejection count as proposed (and not accepted); ones left unjudged
    // because the request finished do not count.
    a.spec_stats.proposed += reason != FinishReason::None && judged == accepted ? judged : n;
    a.spec_stats.accepted += accepted;
    a.spec_stats.current_k = a.k_control->best_k(step_cost_);
    a.spec_stats.rate = a.k_control->rate();
    a.proposal.clear();

    for (auto& e : step_events) {
        e.speculation.verification = verification;
        e.speculation.stats = a.spec_stats;
    }
    if (reason != FinishReason::None) finish(a, reason, step_events.back());
    for (auto& e : step_events) events.push_back(std::move(e));
}

std::string Engine::filter_stop_strings(Active& a, std::string text, FinishReason& reason) {
    a.held_back.clear();
    std::size_t stop_at = std::string::npos;
    for (const auto& stop : a.request.stop_strings) {
        if (!stop.empty()) stop_at = std::min(stop_at, text.find(stop));
    }
    if (stop_at != std::string::npos) {
        text.resize(stop_at);
        reason = FinishReason::StopString;
        return text;
    }
    // Hold back the longest tail that is a proper prefix of some stop string.
    std::size_t hold = 0;
    for (const auto& stop : a.request.stop_strings) {
        for (std::size_t len = std::min(stop.size() - 1, text.size()); len > hold && !stop.empty();
             --len) {
            if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
                hold = len;
                break;
            }
        }
    }
    a.held_back = text.substr(text.size() - hold);
    text.resize(text.size() - hold);
    return text;
}

}  // namespace tokenscope::runtime
