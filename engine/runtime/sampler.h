#pragma once
// Turns one row of logits into one token, and reports what the choice looked like before and
// after the logits were shaped, for the token inspector.
//
// Stage order (the same as llama.cpp's default chain):
//
//   penalties -> top-k -> top-p -> min-p -> temperature -> softmax -> draw
//
// Why this order:
//  - Penalties first: they express "this token was already said" and must be able to push a
//    token out of (or into) the candidate set before any cut is made.
//  - The three truncations run at temperature 1, i.e. on the model's own (penalised)
//    distribution. The support therefore does not depend on the temperature; temperature only
//    reshapes probabilities within the support. (Temperature before the cuts would make a hot
//    temperature admit more tokens through top-p and min-p, coupling two knobs the UI shows
//    separately.)
//  - top-k first among the cuts because it is the cheap one (sampling::best_n reads only the
//    blocks of the vocabulary that can hold a winner): top-p and min-p then work on k
//    candidates instead of 262144. top-p renormalises over the top-k survivors, as llama.cpp
//    does.
//  - min-p's threshold is relative to the most likely surviving token:
//    keep p_i >= min_p * p_max.
//  - Temperature 0 means greedy: the argmax of the penalised logits (ties: lowest id). The cuts
//    are skipped since they always keep the argmax anyway.
//
// The draw uses std::mt19937_64 seeded from SamplingParams::seed; the uniform number is built
// from the generator's raw 64-bit output (not std::uniform_real_distribution, whose algorithm
// differs between standard libraries), so a seed gives the same tokens on every platform for the
// same logits.
//
// A Sampler belongs to one sequence; it is not thread-safe (it owns a random generator and
// scratch buffers reused across steps, so that a step allocates nothing vocabulary-sized).
//
// Cost per step at a 262144-token vocabulary: two vectorised passes over the row (maximum and
// validity, then the softmax normaliser for the "before" probabilities and the model's
// logprob); the top-k and "before" selections read only the few blocks of the row that can
// hold a winner (sampling::best_n); the cuts then work on top_k candidates. The row is copied
// only when a penalty applies. top_k = 0 (no cut) still builds a vocabulary-sized candidate
// set.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "runtime/sampling_stages.h"

namespace tokenscope::runtime {

struct SamplingParams {
    float temperature = 0.8f;        // >= 0; 0 = greedy argmax
    int top_k = 40;                  // >= 0; 0 = off
    float top_p = 0.95f;             // [0, 1]; 1 = off; at least one token always survives
    float min_p = 0.05f;             // [0, 1]; 0 = off; relative to the most likely token
    float repeat_penalty = 1.0f;     // > 0; 1 = off (CTRL convention, see apply_penalties)
    float frequency_penalty = 0.0f;  // [-2, 2] as OpenAI allows; 0 = off
    float presence_penalty = 0.0f;   // [-2, 2]; 0 = off
    int penalty_window = 64;         // >= 0: how many of the most recent tokens the penalties see
    std::uint64_t seed = 0;          // any value; 0 is an ordinary seed, not "random"
    int n_candidates = 10;           // >= 0: entries in SampleResult::before / after

    // Throws InvalidArgument naming the first bad field and its value.
    void validate() const;
};

struct Candidate {
    std::int32_t id = 0;
    float probability = 0.0f;
    float logit = 0.0f;
};

struct SampleResult {
    std::int32_t token = 0;
    // The chosen token under the distribution actually sampled from (after shaping). With
    // temperature 0 that distribution is a point mass: probability 1, logprob 0.
    float probability = 0.0f;
    float logprob = 0.0f;
    // The chosen token under the model's own distribution (softmax of the raw logits), which is
    // what an OpenAI-style "logprobs" field reports.
    float model_probability = 0.0f;
    float model_logprob = 0.0f;
    // How many tokens the final distribution had (1 for greedy).
    std::int32_t support_size = 0;
    // Top n_candidates under softmax(raw logits); logit = raw logit. Most likely first.
    std::vector<Candidate> before;
    // Top n_candidates of the final distribution; logit = the shaped logit the final softmax
    // saw (penalised, divided by the temperature). Most likely first.
    std::vector<Candidate> after;
};

class Sampler {
  public:
    // Throws InvalidArgument for invalid params.
    explicit Sampler(SamplingParams params);

    // One step. `logits` is one row (vocabulary-sized); `history` the tokens of the sequence so
    // far (prompt and generated), oldest first; only its tail of penalty_window tokens is read.
    // Throws InvalidArgument for empty/NaN/+inf logits or a history id outside the vocabulary.
    // sample() is shape(), one draw from its candidates (none for greedy), then result_for().
    SampleResult sample(std::span<const float> logits, std::span<const std::int32_t> history);

    // The distribution sample() draws from for this row and history, after every stage
    // (penalties, top-k, top-p, min-p, temperature), with probabilities filled in; greedy: the
    // argmax alone with probability 1. Speculative verification needs exactly this `p`, not a
    // re-implementation of it. Valid until the next shape()/sample(); `logits` must stay alive
    // until result_for() has been called. Throws as sample() does.
    const sampling::CandidateSet& shape(std::span<const float> logits,
                                        std::span<const std::int32_t> history);
    // After shape(): what sample() reports had it drawn `token` (the inspector's before/after
    // lists, probability under the shaped distribution, the model's own logprob). A token
    // outside the shaped support gets probability 0.
    SampleResult result_for(std::int32_t token);

    // The next number of the seeded stream in [0, 1) (the speculative acceptance tests draw
    // from the same stream as the plain draws).
    double next_uniform();

    const SamplingParams& params() const { return params_; }
    // Restarts the random sequence from params().seed.
    void reset();

  private:
    SamplingParams params_;
    std::mt19937_64 rng_;
    // What shape() leaves for result_for(): the row, its raw statistics and best tokens, the
    // shaped logits and the final candidate set with its softmax statistics.
    std::span<const float> logits_;
    std::span<const float> shaped_;
    sampling::SoftmaxStats raw_stats_;
    sampling::SoftmaxStats set_stats_;
    std::vector<sampling::TokenLogit> best_raw_;
    sampling::CandidateSet set_;
    bool greedy_ = false;
    // Reused across steps: the penalised logits (only when a penalty applies) and the block
    // maxima of the raw and the penalised row (logit_kernels.h).
    std::vector<float> scratch_;
    std::vector<float> block_max_;
    std::vector<float> scratch_block_max_;
};

}  // namespace tokenscope::runtime
