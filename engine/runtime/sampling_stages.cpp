#include "runtime/sampling_stages.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "runtime/logit_kernels.h"
#include "runtime/sampler.h"
#include "util/error.h"

namespace tokenscope::runtime::sampling {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// exp(logit - max) for the softmax normaliser. Evaluated in float (vocabulary-sized loops of
// double exp cost milliseconds per step at 262144 tokens; float exp is several times faster and
// its < 1 ulp error is far below what the UI or the draw can notice) but accumulated in double,
// where the precision loss of summing 262144 terms would show.
inline float shifted_exp(float logit, float max) {
    return std::exp(logit - max);
}

float max_logit(const CandidateSet& set) {
    if (set.sorted) return set.items.front().logit;
    float best = kNegInf;
    for (const auto& c : set.items) best = std::max(best, c.logit);
    return best;
}

// Keeps the `n` best of a stream of candidates in a heap whose front is the worst kept one, so
// that the common case (a token that does not make the cut) costs one float comparison.
class BestN {
  public:
    explicit BestN(std::size_t n) : n_(n) { heap_.reserve(n); }

    void offer(std::int32_t id, float logit) {
        if (n_ == 0) return;
        if (heap_.size() < n_) {
            heap_.push_back({id, logit, 0.0f});
            std::push_heap(heap_.begin(), heap_.end(), ranks_above);
            return;
        }
        // Ids arrive in increasing order, so an equal logit never displaces a kept token:
        // the kept one has the lower id and wins the tie.
        if (logit <= heap_.front().logit) return;
        std::pop_heap(heap_.begin(), heap_.end(), ranks_above);
        heap_.back() = {id, logit, 0.0f};
        std::push_heap(heap_.begin(), heap_.end(), ranks_above);
    }

    // Best first.
    std::vector<TokenLogit> take_sorted() {
        std::sort_heap(heap_.begin(), heap_.end(), ranks_above);
        return std::move(heap_);
    }

  private:
    std::size_t n_;
    std::vector<TokenLogit> heap_;
};

}  // namespace

void apply_penalties(std::span<float> logits, std::span<const std::int32_t> history,
                     const SamplingParams& params) {
    if (!penalties_active(history, params)) return;

    const auto window_size =
        std::min(history.size(), static_cast<std::size_t>(params.penalty_window));
    const auto window = history.subspan(history.size() - window_size);

    // Sorting a copy of the (short) window groups equal ids, which gives the counts without a
    // vocabulary-sized table.
    std::vector<std::int32_t> ids(window.begin(), window.end());
    for (const auto id : ids) {
        if (id < 0 || static_cast<std::size_t>(id) >= logits.size())
            throw InvalidArgument(
                fmt::format("sampler: history token id {} is outside the vocabulary of {} tokens",
                            id, logits.size()));
    }
    std::sort(ids.begin(), ids.end());

    for (std::size_t i = 0; i < ids.size();) {
        std::size_t j = i;
        while (j < ids.size() && ids[j] == ids[i]) ++j;
        const auto count = static_cast<float>(j - i);
        float& logit = logits[static_cast<std::size_t>(ids[i])];
        if (logit > 0.0f)
            logit /= params.repeat_penalty;
        else
            logit *= params.repeat_penalty;
        logit -= count * params.frequency_penalty + params.presence_penalty;
        i = j;
    }
}

bool penalties_active(std::span<const std::int32_t> history, const SamplingParams& params) {
    const bool neutral = params.repeat_penalty == 1.0f && params.frequency_penalty == 0.0f &&
                         params.presence_penalty == 0.0f;
    return !neutral && params.penalty_window > 0 && !history.empty();
}

std::vector<TokenLogit> best_n(std::span<const float> logits, std::span<const float> block_max,
                               std::size_t n) {
    if (n == 0) return {};
    // The bound: the n-th largest block maximum, or -infinity (read everything) when there are
    // not more blocks than wanted tokens.
    float bound = kNegInf;
    if (n < block_max.size()) {
        std::vector<float> maxima(block_max.begin(), block_max.end());
        const auto nth = maxima.begin() + static_cast<std::ptrdiff_t>(n - 1);
        std::nth_element(maxima.begin(), nth, maxima.end(), std::greater<>());
        bound = *nth;
    }
    // Blocks and the logits in them in increasing id order, as BestN's tie rule needs. A logit
    // below the bound ranks below n others, so it is never offered.
    BestN best(n);
    for (std::size_t b = 0; b < block_max.size(); ++b) {
        if (!(block_max[b] >= bound)) continue;
        const std::size_t end = std::min(logits.size(), (b + 1) * kLogitBlock);
        for (std::size_t i = b * kLogitBlock; i < end; ++i)
            if (logits[i] >= bound && logits[i] > kNegInf)
                best.offer(static_cast<std::int32_t>(i), logits[i]);
    }
    return best.take_sorted();
}

CandidateSet make_candidates(std::span<const float> logits, int top_k) {
    CandidateSet set;
    const auto n = logits.size();
    if (top_k > 0 && static_cast<std::size_t>(top_k) < n) {
        std::vector<float> block_max(logit_blocks(n));
        best_logit_kernels().scan(logits.data(), n, block_max.data());
        set.items = best_n(logits, block_max, static_cast<std::size_t>(top_k));
        set.sorted = true;
        return set;
    }
    set.items.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        if (logits[i] > kNegInf)
            set.items.push_back({static_cast<std::int32_t>(i), logits[i], 0.0f});
    set.sorted = set.items.size() <= 1;
    return set;
}

void top_k(CandidateSet& set, int k) {
    auto& v = set.items;
    if (k <= 0 || static_cast<std::size_t>(k) >= v.size()) return;
    const auto keep = static_cast<std::size_t>(k);
    if (!set.sorted) {
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(keep), v.end(),
                         ranks_above);
        v.resize(keep);
        std::sort(v.begin(), v.end(), ranks_above);
        set.sorted = true;
    } else {
        v.resize(keep);
    }
}

void top_p(CandidateSet& set, float p) {
    auto& v = set.items;
    if (v.empty() || p >= 1.0f) return;

    const float max = max_logit(set);
    double total = 0.0;
    for (const auto& c : v) total += shifted_exp(c.logit, max);
    const double target = static_cast<double>(std::max(p, 0.0f)) * total;

    // items[0, sorted_end) are the best ones in order; everything after ranks below them.
    std::size_t sorted_end = set.sorted ? v.size() : 0;
    double cumulative = 0.0;
    std::size_t kept = 0;
    while (kept < v.size()) {
        if (kept == sorted_end) {
            // Grow the sorted prefix geometrically: a peaked distribution stops after the first
            // chunk (one O(n) selection), a flat one costs O(n) per growth step plus sorting
            // what it keeps.
            const std::size_t grow = std::max<std::size_t>(64, sorted_end * 3);
            const std::size_t new_end = std::min(v.size(), sorted_end + grow);
            const auto first = v.begin() + static_cast<std::ptrdiff_t>(sorted_end);
            const auto last = v.begin() + static_cast<std::ptrdiff_t>(new_end);
            if (last != v.end()) std::nth_element(first, last, v.end(), ranks_above);
            std::sort(first, last, ranks_above);
            sorted_end = new_end;
        }
        cumulative += shifted_exp(v[kept].logit, max);
        ++kept;
        if (cumulative >= target) break;
    }
    v.resize(std::max<std::size_t>(kept, 1));
    set.sorted = true;
}

void min_p(CandidateSet& set, float min_p) {
    auto& v = set.items;
    if (v.empty() || min_p <= 0.0f) return;
    // p_i >= min_p * p_max  <=>  logit_i - max_logit >= ln(min_p); the normaliser cancels.
    const double threshold =
        static_cast<double>(max_logit(set)) + std::log(static_cast<double>(min_p));
    std::erase_if(
        v, [threshold](const TokenLogit& c) { return static_cast<double>(c.logit) < threshold; });
}

void temperature(CandidateSet& set, float t) {
    for (auto& c : set.items) c.logit /= t;
}

SoftmaxStats softmax(CandidateSet& set) {
    SoftmaxStats stats;
    if (set.items.empty()) return stats;
    const float max = max_logit(set);
    double sum = 0.0;
    for (auto& c : set.items) {
        c.probability = shifted_exp(c.logit, max);
        sum += c.probability;
    }
    const auto scale = static_cast<float>(1.0 / sum);
    for (auto& c : set.items) c.probability *= scale;
    stats.max_logit = max;
    stats.log_sum = std::log(sum);
    return stats;
}

std::size_t draw(const CandidateSet& set, double uniform) {
    const auto& v = set.items;
    if (v.empty()) throw InvalidArgument("sampler: cannot draw from an empty candidate set");
    double total = 0.0;
    for (const auto& c : v) total += c.probability;
    const double target = uniform * total;
    double cumulative = 0.0;
    std::size_t last_possible = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i].probability <= 0.0f) continue;
        cumulative += v[i].probability;
        last_possible = i;
        if (cumulative > target) return i;
    }
    // Rounding left `target` just above the running sum: the last token that can be drawn.
    return last_possible;
}

std::int32_t argmax(std::span<const float> logits) {
    if (logits.empty()) throw InvalidArgument("sampler: argmax of an empty logits row");
    std::size_t best = 0;
    for (std::size_t i = 1; i < logits.size(); ++i)
        if (logits[i] > logits[best]) best = i;  // strict: ties keep the lower id
    return static_cast<std::int32_t>(best);
}

std::vector<Candidate> softmax_top_n(std::span<const float> logits, int n, SoftmaxStats* stats) {
    const LogitKernels& kernels = best_logit_kernels();
    std::vector<float> block_max(logit_blocks(logits.size()));
    const LogitScan scan = kernels.scan_softmax(logits.data(), logits.size(), block_max.data());
    const SoftmaxStats raw{scan.max, std::log(scan.sum_exp)};
    if (stats) *stats = raw;
    const auto wanted = static_cast<std::size_t>(std::max(n, 0));
    return with_probabilities(best_n(logits, block_max, wanted), wanted, raw);
}

std::vector<Candidate> with_probabilities(std::span<const TokenLogit> best, std::size_t n,
                                          const SoftmaxStats& stats) {
    std::vector<Candidate> out;
    out.reserve(std::min(n, best.size()));
    for (const auto& c : best.first(std::min(n, best.size()))) {
        const double logprob = (static_cast<double>(c.logit) - stats.max_logit) - stats.log_sum;
        out.push_back({c.id, static_cast<float>(std::exp(logprob)), c.logit});
    }
    return out;
}

void check_logits(std::span<const float> logits) {
    if (logits.empty()) throw InvalidArgument("sampler: the logits row is empty");
    bool any_finite = false;
    for (std::size_t i = 0; i < logits.size(); ++i) {
        const float l = logits[i];
        if (std::isnan(l))
            throw InvalidArgument(fmt::format("sampler: logit of token {} is NaN", i));
        if (l == std::numeric_limits<float>::infinity())
            throw InvalidArgument(fmt::format("sampler: logit of token {} is +infinity", i));
        any_finite = any_finite || std::isfinite(l);
    }
    if (!any_finite)
        throw InvalidArgument(fmt::format(
            "sampler: all {} logits are -infinity; no token can be drawn", logits.size()));
}

}  // namespace tokenscope::runtime::sampling
