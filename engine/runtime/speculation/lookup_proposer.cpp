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
            // Copied as LZ77 copies a match that overlaps its own output: past the end of the
            // sequence the proposal continues from its own first tokens, so a pattern with
            // period size - from (a repeated line, a run of one token) fills all k slots
            // instead of stopping after one period.
            const std::ptrdiff_t from = start + n;
            out.reserve(static_cast<std::size_t>(k));
            for (std::ptrdiff_t i = 0; i < k; ++i) {
                const std::ptrdiff_t src = from + i;
                out.push_back(src < size ? tokens[static_cast<std::size_t>(src)]
                                         : out[static_cast<std::size_t>(src - size)]);
            }
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
