#include "runtime/speculation/draft_proposer.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "runtime/engine.h"
#include "util/error.h"

namespace tokenscope::runtime::speculation {

struct DraftProposer::State {
    kv::SeqId seq = 0;
    std::vector<std::int32_t> cached;  // what the draft cache holds for this sequence
    Sampler sampler;
    ForwardOutputs out;

    explicit State(const SamplingParams& params) : sampler(params) {}
};

namespace {

// The draft draws its proposals from its own stream, not the target's: q and the acceptance
// test must be independent.
SamplingParams draft_params(SamplingParams params) {
    params.seed ^= 0x9e3779b97f4a7c15ULL;
    params.n_candidates = 0;  // no inspector lists for proposals
    return params;
}

void check_same_vocabulary(const std::string& path, const tokenizer::Tokenizer& draft,
                           const tokenizer::Tokenizer& target) {
    if (draft.vocab_size() != target.vocab_size()) {
        throw FormatError(path + ": the draft model's vocabulary has " +
                          std::to_string(draft.vocab_size()) + " tokens, the target's " +
                          std::to_string(target.vocab_size()) +
                          "; speculative decoding needs the same vocabulary");
    }
    for (std::int32_t id = 0; id < draft.vocab_size(); ++id) {
        if (draft.piece(id) != target.piece(id)) {
            throw FormatError(
                path + ": the draft model's vocabulary differs from the target's at token " +
                std::to_string(id) + " ('" + draft.piece(id) + "' vs '" + target.piece(id) +
                "'); speculative decoding needs the same vocabulary");
        }
    }
}

}  // namespace

DraftProposer::DraftProposer(const std::string& path, const EngineOptions& options,
                             const tokenizer::Tokenizer& target) {
    EngineOptions draft_options = options;
    draft_options.speculation = {};
    draft_ = Engine::load(path, draft_options);
    check_same_vocabulary(path, draft_->tokenizer(), target);
}

DraftProposer::~DraftProposer() = default;

kv::SeqId DraftProposer::draft_sequence(kv::SeqId seq) const {
    const auto it = states_.find(seq);
    return it == states_.end() ? -1 : it->second->seq;
}

bool DraftProposer::feed(State& s, std::span<const std::int32_t> tokens) {
    const std::int64_t budget = draft_->options().token_budget;
    for (std::size_t done = 0; done < tokens.size();) {
        const auto n = static_cast<int>(
            std::min<std::size_t>(tokens.size() - done, static_cast<std::size_t>(budget)));
        if (!draft_->kv().allocate_slots(s.seq, n)) return false;
        Batch batch;
        batch.chunks.push_back({s.seq, tokens.subspan(done, static_cast<std::size_t>(n)),
                                static_cast<std::int64_t>(s.cached.size()),
                                done + static_cast<std::size_t>(n) == tokens.size()
                                    ? LogitsWanted::Last
                                    : LogitsWanted::None,
                                nullptr});
        draft_->forward(batch, s.out);
        s.cached.insert(s.cached.end(), tokens.begin() + static_cast<std::ptrdiff_t>(done),
                        tokens.begin() + static_cast<std::ptrdiff_t>(done) + n);
        done += static_cast<std::size_t>(n);
    }
    return true;
}

void DraftProposer::truncate_to_prefix(State& s, std::span<const std::int32_t> tokens,
                                       std::size_t limit) {
    std::size_t common = 0;
    const std::size_t n = std::min({s.cached.size(), tokens.size(), limit});
    while (common < n && s.cached[common] == tokens[common]) ++common;
    if (common == s.cached.size()) return;
    draft_->kv().truncate(s.seq, static_cast<int>(common));
    s.cached.resize(common);
}

void DraftProposer::propose(kv::SeqId seq, std::span<const std::int32_t> tokens, int k,
                            const SamplingParams& sampling, Proposal& out) {
    out.clear();
    if (k <= 0 || tokens.empty()) return;
    if (static_cast<std::int64_t>(tokens.size()) + k > draft_->config().context_length) return;
    auto& slot = states_[seq];
    if (!slot) {
        slot = std::make_unique<State>(draft_params(sampling));
        slot->seq = draft_->new_sequence_id();
        draft_->kv().allocate_slots(slot->seq, 0);  // creates the sequence
    }
    State& s = *slot;
    // Keep what the draft already holds of the sequence, but always feed at least the last
    // token: its logits give the first proposal.
    truncate_to_prefix(s, tokens, tokens.size() - 1);
    if (!feed(s, tokens.subspan(s.cached.size()))) {
        spdlog::debug("draft: KV cache full; no proposal for sequence {}", seq);
        return;
    }
    const bool greedy = sampling.temperature == 0.0f;
    history_.assign(tokens.begin(), tokens.end());
    for (int i = 0; i < k; ++i) {
        const sampling::CandidateSet& q = s.sampler.shape(s.out.row(s.out.first_row[0]), history_);
        const std::int32_t token =
            greedy ? q.items.front().id : q.items[sampling::draw(q, s.sampler.next_uniform())].id;
        out.tokens.push_back(token);
        if (!greedy) {
            auto& sorted = out.q.emplace_back(q.items.begin(), q.items.end());
            std::sort(sorted.begin(), sorted.end(),
                      [](const sampling::TokenLogit& a, const sampling::TokenLogit& b) {
                          return a.id < b.id;
                      });
        }
        history_.push_back(token);
        if (i + 1 < k && !feed(s, std::span<const std::int32_t>(&history_.back(), 1))) break;
    }
}

void DraftProposer::accept(kv::SeqId seq, std::span<const std::int32_t> kept) {
    const auto it = states_.find(seq);
    if (it != states_.end()) truncate_to_prefix(*it->second, kept, kept.size());
}

void DraftProposer::release(kv::SeqId seq) {
    const auto it = states_.find(seq);
    if (it == states_.end()) return;
    if (draft_->kv().has_sequence(it->second->seq)) draft_->kv().free_sequence(it->second->seq);
    states_.erase(it);
}

}  // namespace tokenscope::runtime::speculation
