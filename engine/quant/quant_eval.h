#pragma once
// quant-eval: what quantization costs, measured against a base model on a text, the way
// llama-perplexity --kl-divergence does: perplexity, and per scored position the KL divergence
// KL(P_base || P_model) of the next-token distributions and whether their top-1 tokens agree.
//
// Memory: the base's logit rows (and each row's log-sum-exp) are computed once per window of `ctx`
// tokens and reused by every model, which are all loaded at once (mmapped) and run on that window
// in turn. So at most ctx x vocab floats of base logits are held (Gemma 3: 512 x 262144 x 4 B = 512
// MiB), however long the text, instead of text_tokens x vocab.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tokenscope::quant {

struct EvalOptions {
    std::string base;
    std::vector<std::string> models;
    std::string text;        // the evaluation text itself
    std::int64_t ctx = 512;  // tokens per window (BOS included when the model wants one)
    int threads = 0;         // per engine; 0: one per hardware thread
    int decode_tokens = 32;  // greedy decode steps timed per model (0: skip)
    std::function<void(const std::string&)> progress;  // one line per window and model
};

struct ModelEval {
    std::string path;
    std::uint64_t file_bytes = 0;
    double bits_per_weight = 0;  // all tensor bytes * 8 / all tensor elements
    double perplexity = 0;
    double delta_perplexity = 0;
    double kl_mean = 0;
    double kl_p99 = 0;
    double kl_max = 0;
    double top1_agreement = 0;  // fraction of positions
    double decode_tokens_per_second = 0;
    std::int64_t scored = 0;
};

struct EvalResult {
    ModelEval base;  // KL 0, agreement 1 by definition
    std::vector<ModelEval> models;
    std::int64_t tokens = 0;  // of the text
    std::int64_t windows = 0;
    std::int64_t ctx = 0;
};

// Throws InvalidArgument when a model's vocabulary size differs from the base's.
EvalResult evaluate_quantizations(const EvalOptions& options);

// log-softmax of `logits` into `out` (same length); float64 sums.
void log_softmax(std::span<const float> logits, std::span<float> out);
// KL(P || Q) in nats, P = softmax(base_logits), Q = softmax(logits); float64 sums.
double kl_divergence(std::span<const float> base_logits, std::span<const float> logits);

}  // namespace tokenscope::quant
