#pragma once
// How many tokens to propose next, per sequence, from its recent acceptance rate and what a
// verification costs.
//
// Model: each proposed token is accepted with probability a (independently), so a verification
// of k proposals yields E(k) = 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a) tokens (the
// accepted ones plus the target's own token) and costs StepCost::ratio(k) plain decode steps.
// next_k() picks the k in [0, max_k] that maximises E(k) / ratio(k); when no k beats plain
// decoding by `min_gain` it answers 0 (speculation off for this sequence) and, every
// `probe_interval` plain steps, answers `probe_k` once, so a sequence whose text turns
// repetitive gets speculation back. A probe that accepts nothing doubles the wait before the
// next one (up to `max_probe_interval`); one that accepts something restores `probe_interval`.
//
// a is an exponential moving average over observed proposals: a verification that accepted m
// of n judged proposals observed m acceptances and, when m < n, one rejection (proposals after
// a rejection are never judged, so they say nothing).
#include <array>

namespace tokenscope::runtime::speculation {

// A verification chunk of k + 1 <= 15 tokens runs the CPU's small-batch matmul kernels, which
// give every token of the chunk its one-token decode result bit for bit (test_matmul
// smallBatchesMatchDecodeBitForBit); from 16 tokens (tensor::kPanelMinTokens) the prefill
// kernels take over, whose sums differ from decode's in the last bits for every token (measured
// for F16, Q8_0, Q4_1, Q5_0, Q4_K and Q6_K at 16, 20 and 33 tokens on AVX2 and AVX-512). Greedy
// speculation must match plain decoding token for token, so k stops at 14 (it was 32).
inline constexpr int kMaxK = 14;

// The cost of verifying k proposals (a chunk of k + 1 tokens) relative to one plain decode step.
// Until measured: 1 + fixed + per_token * k. The fixed part is large on the CPU, where the
// matmuls for several tokens take a packed path that costs about twice the one-token path
// (measured on this project's 2-core AVX2 machine: SmolLM2-135M Q4_1 2.15x for 2 tokens, 4.3x
// for 9; Gemma 3 270M Q4_K_M 1.45x and 2.65x). record() then replaces the model by an
// exponential moving average of measured step times per chunk size.
class StepCost {
  public:
    explicit StepCost(double fixed = 0.5, double per_token = 0.2)
        : fixed_(fixed), per_token_(per_token) {}
    // Verification of k proposals / plain step (1 for k = 0).
    double ratio(int k) const;
    // A decode step that ran `tokens` tokens (1: plain; k + 1: a verification) took `ms`.
    void record(int tokens, double ms);

  private:
    double fixed_, per_token_;
    std::array<double, kMaxK + 2> ms_{};  // by tokens in the step; 0: not measured
};

struct AdaptiveKOptions {
    double initial_rate = 0.6;  // a before anything is observed: optimistic enough to try
    double weight = 0.15;       // EMA weight of one observation
    double min_gain = 0.03;     // below 1 + min_gain times plain decoding, k = 0
    int probe_interval = 16;    // plain steps between probes while k = 0
    // Where probes keep failing the wait doubles up to this. Each probe costs about one plain
    // step (a 3-token verification against 1); at a fixed 16 the probes cost SmolLM2 about 7 %
    // on a prompt whose proposals the model never took (edit-code, 0 % accepted, 0.93x).
    int max_probe_interval = 128;
    int probe_k = 2;
    // k may grow by this much per verification seen: a sequence starts at k <= ramp and earns
    // longer proposals. Without it the optimistic initial rate sent k = 8 verifications
    // (3x a decode step on the CPU) at text that accepts nothing, and open-ended prompts on
    // SmolLM2 lost 11-14 % before the rate caught up.
    int ramp = 2;
};

class AdaptiveK {
  public:
    // max_k in [1, kMaxK] (the engine validates it).
    AdaptiveK(int max_k, AdaptiveKOptions options = {});

    // k for this sequence's next step; call once per decode step (it counts plain steps).
    int next_k(const StepCost& cost);
    // After a verification: `judged` proposals were judged (up to the first rejection), of
    // which `accepted` were accepted.
    void record(int judged, int accepted);

    double rate() const { return rate_; }
    int max_k() const { return max_k_; }
    // The k that maximises E(k) / cost.ratio(k) at the current rate (0 when nothing pays).
    int best_k(const StepCost& cost) const;
    // E(k) for acceptance rate a.
    static double expected_tokens(double a, int k);

  private:
    int max_k_;
    AdaptiveKOptions options_;
    double rate_;
    int plain_steps_ = 0;
    int verifications_ = 0;
    int probe_wait_;        // plain steps before the next probe
    bool probing_ = false;  // the last k answered was a probe
};

}  // namespace tokenscope::runtime::speculation
