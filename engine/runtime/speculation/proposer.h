#pragma once
// A proposer guesses the next few tokens of a sequence cheaply; the target model then checks
// all of them in one forward pass (speculative decoding, engine.cpp). Two exist: prompt
// lookup (lookup_proposer.h: copy what followed the latest n-gram earlier in the sequence)
// and a draft model (draft_proposer.h: a small model with the same vocabulary).
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "runtime/sampler.h"
#include "runtime/sampling_stages.h"

namespace tokenscope::runtime::speculation {

struct Proposal {
    std::vector<std::int32_t> tokens;
    // Per proposed token, the distribution it was drawn from (the draft's q, sorted by id).
    // Empty: the proposal is deterministic, q is one-hot at the token (prompt lookup, or a
    // greedy draft).
    std::vector<std::vector<sampling::TokenLogit>> q;

    void clear() {
        tokens.clear();
        q.clear();
    }
};

class Proposer {
  public:
    virtual ~Proposer() = default;
    // Up to k tokens that may follow `tokens` (the sequence so far, prompt and generated) into
    // `out` (cleared first; fewer or none when the proposer has no guess). `seq` names the
    // target's sequence for proposers that keep per-sequence state; `sampling` are the
    // request's settings, under which a draft model draws.
    virtual void propose(kv::SeqId seq, std::span<const std::int32_t> tokens, int k,
                         const SamplingParams& sampling, Proposal& out) = 0;
    // After a verification: the sequence's cache now holds `kept` (everything the target
    // accepted except the newest token). Per-sequence state past it is rolled back.
    virtual void accept(kv::SeqId /*seq*/, std::span<const std::int32_t> /*kept*/) {}
    // The sequence finished; its state (a draft cache) is freed.
    virtual void release(kv::SeqId /*seq*/) {}
    virtual const char* name() const = 0;
};

}  // namespace tokenscope::runtime::speculation
