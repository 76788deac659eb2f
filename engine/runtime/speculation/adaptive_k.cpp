#include "runtime/speculation/adaptive_k.h"

#include <algorithm>

namespace tokenscope::runtime::speculation {

namespace {
constexpr double kCostWeight = 0.2;  // EMA weight of one measured step
}

double StepCost::ratio(int k) const {
    if (k <= 0) return 1.0;
    const auto plain = ms_[1];
    const auto verify = ms_[static_cast<std::size_t>(std::min(k + 1, kMaxK + 1))];
    if (plain > 0.0 && verify > 0.0) return verify / plain;
    return 1.0 + fixed_ + per_token_ * k;
}

void StepCost::record(int tokens, double ms) {
    if (tokens < 1 || tokens > kMaxK + 1 || !(ms > 0.0)) return;
    double& m = ms_[static_cast<std::size_t>(tokens)];
    m = m > 0.0 ? m + kCostWeight * (ms - m) : ms;
}

AdaptiveK::AdaptiveK(int max_k, AdaptiveKOptions options)
    : max_k_(std::clamp(max_k, 1, kMaxK)),
      options_(options),
      rate_(options.initial_rate),
      probe_wait_(options.probe_interval) {}

double AdaptiveK::expected_tokens(double a, int k) {
    double expected = 0.0;
    double term = 1.0;  // a^i
    for (int i = 0; i <= k; ++i) {
        expected += term;
        term *= a;
    }
    return expected;
}

int AdaptiveK::best_k(const StepCost& cost) const {
    int best = 0;
    double best_speedup = 1.0 + options_.min_gain;
    for (int k = 1; k <= max_k_; ++k) {
        const double s = expected_tokens(rate_, k) / cost.ratio(k);
        if (s > best_speedup) {
            best = k;
            best_speedup = s;
        }
    }
    return best;
}

int AdaptiveK::next_k(const StepCost& cost) {
    const int k = std::min(best_k(cost), options_.ramp * (verifications_ + 1));
    probing_ = false;
    if (k > 0) {
        plain_steps_ = 0;
        probe_wait_ = options_.probe_interval;
        return k;
    }
    if (++plain_steps_ < probe_wait_) return 0;
    plain_steps_ = 0;
    probing_ = true;
    return std::min(options_.probe_k, max_k_);
}

void AdaptiveK::record(int judged, int accepted) {
    ++verifications_;
    if (probing_) {
        probe_wait_ =
            accepted > 0 ? options_.probe_interval
                         : std::min(2 * probe_wait_,
                                    std::max(options_.probe_interval, options_.max_probe_interval));
        probing_ = false;
    }
    for (int i = 0; i < accepted; ++i) rate_ += options_.weight * (1.0 - rate_);
    if (accepted < judged) rate_ += options_.weight * (0.0 - rate_);
}

}  // namespace tokenscope::runtime::speculation
