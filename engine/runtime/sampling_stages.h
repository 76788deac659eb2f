#pragma once
// The individual stages of the sampler chain, as free functions so that each can be tested on
// its own with hand-computed examples. Sampler (sampler.h) strings them together.
//
// Ordering convention used everywhere: a candidate ranks above another when its logit is
// higher, or, on equal logits, when its id is lower. That makes every cut (top-k, top-p) and
// every argmax deterministic: ties go to the lowest id.
#include <cstdint>
#include <span>
#include <vector>

namespace tokenscope::runtime {

struct SamplingParams;
struct Candidate;

namespace sampling {

struct TokenLogit {
    std::int32_t id = 0;
    float logit = 0.0f;
    float probability = 0.0f;  // valid only after softmax()
};

// The tokens one sampling step is still considering. Stages only ever remove candidates or
// rescale logits; they never add tokens back.
struct CandidateSet {
    std::vector<TokenLogit> items;
    // items are in ranking order (see above). Stages that need the order establish it; the
    // ones that do not (min-p, temperature) keep it when it is there.
    bool sorted = false;
};

// True when `a` ranks above `b` (higher logit; on a tie, lower id).
inline bool ranks_above(const TokenLogit& a, const TokenLogit& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Repetition, frequency and presence penalties over the last `params.penalty_window` tokens of
// `history` (0 = no penalties), applied in place to `logits` (indexed by token id):
//   repetition (CTRL / llama.cpp): a token seen at least once has a positive logit divided by
//     r and a non-positive one multiplied by r, so r > 1 always makes it less likely;
//   frequency / presence (OpenAI):  logit -= count * frequency + (count > 0) * presence.
// Repetition is applied first, as llama.cpp does. Throws InvalidArgument for a history id
// outside [0, logits.size()).
void apply_penalties(std::span<float> logits, std::span<const std::int32_t> history,
                     const SamplingParams& params);

// True when apply_penalties would change something: some penalty is on and the window sees at
// least one token. When false the sampler works on the caller's logits without copying them.
bool penalties_active(std::span<const std::int32_t> history, const SamplingParams& params);

// The n best tokens among those with a logit above -infinity, in ranking order. `block_max`
// holds the maxima of the row's blocks of kLogitBlock logits (LogitKernels::scan). The n-th
// largest block maximum is a lower bound for the n-th best logit (n blocks reach it, and each
// holds a logit at least that large), so only blocks whose maximum reaches it are read: at a
// 262144-token vocabulary a selection among 1024 block maxima and a few dozen blocks instead of
// a pass over the whole row. The result is exactly that of a full sort.
std::vector<TokenLogit> best_n(std::span<const float> logits, std::span<const float> block_max,
                               std::size_t n);

// All tokens with a logit above -infinity (an -inf logit means "masked": it can never be
// drawn, so it is not a candidate), in id order. When 0 < top_k < logits.size(), only the
// top_k best are kept (best_n; no sort of the whole vocabulary), and the result is sorted.
CandidateSet make_candidates(std::span<const float> logits, int top_k);

// Keeps the k best candidates (k <= 0: all). Uses nth_element, then sorts the k survivors.
void top_k(CandidateSet& set, int k);

// Nucleus: keeps the smallest prefix (in ranking order) whose probability mass, under the
// softmax of the current candidates' logits, reaches p; the candidate that crosses p is kept.
// At least one candidate always survives. p >= 1 keeps everything and changes nothing.
// Otherwise the set is sorted only as far as needed (a growing partial sort), so a peaked
// distribution over a whole vocabulary costs O(n), not O(n log n); the survivors are left
// sorted.
void top_p(CandidateSet& set, float p);

// Keeps candidates whose probability is at least min_p times the probability of the most
// likely candidate (a threshold relative to the maximum, not an absolute one), i.e.
// logit >= max_logit + ln(min_p). min_p <= 0 keeps everything; the best candidate always
// survives.
void min_p(CandidateSet& set, float min_p);

// Divides every logit by t (t > 0). Ranking order is unchanged.
void temperature(CandidateSet& set, float t);

// Fills in each candidate's probability (softmax of the current logits; the normaliser is
// accumulated in double). Returns log of the normaliser relative to the maximum logit, i.e.
// logprob_i = (logit_i - max_logit) - returned value, for callers that want log-probabilities
// without the precision loss of log(probability).
struct SoftmaxStats {
    float max_logit = 0.0f;
    double log_sum = 0.0;  // log(sum_i exp(logit_i - max_logit))
};
SoftmaxStats softmax(CandidateSet& set);

// Index into set.items drawn with probability proportional to items[i].probability, using
// `uniform` in [0, 1). Candidates with probability 0 are never chosen.
std::size_t draw(const CandidateSet& set, double uniform);

// The id with the highest logit (ties: lowest id). Throws InvalidArgument when `logits` is
// empty.
std::int32_t argmax(std::span<const float> logits);

// The n most likely tokens under the plain softmax of `logits` (the model's own distribution),
// most likely first, each with its probability and raw logit. Also returns the softmax
// statistics of the whole vocabulary, so that any token's probability can be recovered.
std::vector<Candidate> softmax_top_n(std::span<const float> logits, int n, SoftmaxStats* stats);

// The first n of `best` (ranking order) as inspector candidates: raw logit, and probability
// exp(logprob) under the softmax whose statistics are `stats`.
std::vector<Candidate> with_probabilities(std::span<const TokenLogit> best, std::size_t n,
                                          const SoftmaxStats& stats);

// Checks that `logits` can be sampled from: non-empty, no NaN, no +infinity, and at least one
// finite value. Throws InvalidArgument naming the first offending index.
void check_logits(std::span<const float> logits);

}  // namespace sampling
}  // namespace tokenscope::runtime
