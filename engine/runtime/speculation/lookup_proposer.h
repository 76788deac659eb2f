#pragma once
// Prompt lookup: no second model. The latest n tokens of the sequence (n from max_ngram down
// to min_ngram, longest first) are searched for earlier in the sequence, prompt and output
// alike; the tokens that followed their most recent earlier occurrence are the proposal. It
// pays when the answer quotes its input (editing code, summarising or answering from a given
// text) and costs only a scan of the sequence.
#include "runtime/speculation/proposer.h"

namespace tokenscope::runtime::speculation {

struct LookupOptions {
    int min_ngram = 1;
    int max_ngram = 4;
};

// The proposal as a free function, for tests: up to k tokens following the most recent
// earlier occurrence of the longest suffix n-gram (min_ngram <= n <= max_ngram) that occurs
// earlier. The continuation always has k tokens when there is a match: where it reaches the end
// of the sequence it repeats the period it has copied (a repeating pattern continues).
std::vector<std::int32_t> lookup_continuation(std::span<const std::int32_t> tokens, int k,
                                              const LookupOptions& options);

class LookupProposer : public Proposer {
  public:
    explicit LookupProposer(LookupOptions options = {}) : options_(options) {}
    void propose(kv::SeqId seq, std::span<const std::int32_t> tokens, int k,
                 const SamplingParams& sampling, Proposal& out) override;
    const char* name() const override { return "lookup"; }

  private:
    LookupOptions options_;
};

}  // namespace tokenscope::runtime::speculation
