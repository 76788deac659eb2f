#pragma once
// A draft model: a second, smaller GGUF with the target's vocabulary proposes k tokens by
// decoding them one at a time, drawing each under the request's sampling settings applied to
// its own logits (its q). It runs in an Engine of its own (its own backend and paged KV cache),
// driven through the low-level forward()/kv() interface, so it works on any backend.
//
// Its cache is kept in step with the target's: for each target sequence it holds a draft
// sequence whose tokens are always a prefix of the target's; after a verification accept()
// truncates it to what the target kept, and propose() first feeds whatever the target added
// since (the last sampled token, or the bonus token).
#include <map>
#include <memory>
#include <string>

#include "runtime/speculation/proposer.h"

namespace tokenscope::tokenizer {
class Tokenizer;
}

namespace tokenscope::runtime {
class Engine;
struct EngineOptions;
}  // namespace tokenscope::runtime

namespace tokenscope::runtime::speculation {

class DraftProposer : public Proposer {
  public:
    // Loads the draft with the target's engine options (speculation off) and checks that its
    // vocabulary is the target's, token for token; throws FormatError naming the first
    // difference otherwise.
    DraftProposer(const std::string& path, const EngineOptions& options,
                  const tokenizer::Tokenizer& target);
    ~DraftProposer() override;

    void propose(kv::SeqId seq, std::span<const std::int32_t> tokens, int k,
                 const SamplingParams& sampling, Proposal& out) override;
    void accept(kv::SeqId seq, std::span<const std::int32_t> kept) override;
    void release(kv::SeqId seq) override;
    const char* name() const override { return "draft"; }

    // The draft's engine (tests compare its cache with one built without speculation).
    Engine& engine() { return *draft_; }
    // The draft sequence that shadows target sequence `seq`, or -1.
    kv::SeqId draft_sequence(kv::SeqId seq) const;

  private:
    struct State;
    // Runs `tokens` through the draft sequence (chunks of the token budget), last row's logits
    // in out_; false when the draft cache is full.
    bool feed(State& s, std::span<const std::int32_t> tokens);
    void truncate_to_prefix(State& s, std::span<const std::int32_t> tokens, std::size_t limit);

    std::unique_ptr<Engine> draft_;
    std::map<kv::SeqId, std::unique_ptr<State>> states_;
    std::vector<std::int32_t> history_;  // scratch: the sequence with the proposals so far
};

}  // namespace tokenscope::runtime::speculation
