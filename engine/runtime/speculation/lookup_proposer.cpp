#include "runtime/speculation/lookup_proposer.h"

#include <algorithm>

namespace tokenscope::runtime::speculation {

std::vector<std::int32_t> lookup_continuation(std::span<const std::int32_t> tokens, int k,
                                              const LookupOptions& options) {
    std::vector<std::int32_t> out;
    const auto size = static_cast<std::ptrdiff_t>(tokens.size());
    if (k <= 0) return out;
    for (int n = std::min<std::ptrdiff_t>(options.max_ngram, size - 1);
         n >= std::max(1, options.min_ngram); --n) {
        const auto suffix = tokens.last(static_cast<std::size_t>(n));
        // Occurrences starting at `start`, latest first; start + n < size, so it is earlier
        // than the suffix and has at least one token after it.
        for (std::ptrdiff_t start = size - n - 1; start >= 0; --start) {
            if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
            const std::ptrdiff_t from = start + n;
            const std::ptrdiff_t count = std::min<std::ptrdiff_t>(k, size - from);
            out.assign(tokens.begin() + from, tokens.begin() + from + count);
            return out;
        }
    }
    return out;
}

void LookupProposer::propose(kv::SeqId, std::span<const std::int32_t> tokens, int k,
                             const SamplingParams&, Proposal& out) {
    out.clear();
    out.tokens = lookup_continuation(tokens, k, options_);
}

}  // namespace tokenscope::runtime::speculation
