#pragma once
// Scoring a text the way llama-perplexity and llama-imatrix do, shared by `ppl`, `imatrix` and
// `quant-eval`: non-overlapping windows of ctx tokens (each starting with BOS when the
// vocabulary wants one), every window run through a fresh sequence with all positions' logits.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace tokenscope::runtime {

// The windows of `tokens`: ctx tokens each (BOS included), the last one shorter. Throws
// InvalidArgument naming `who` when ctx leaves fewer than 2 text tokens per window or there
// are fewer than 2 tokens.
std::vector<std::vector<std::int32_t>> split_into_windows(const tokenizer::Tokenizer& tokenizer,
                                                          std::span<const std::int32_t> tokens,
                                                          std::int64_t ctx, const std::string& who);

// Runs `window` through a fresh sequence of `engine` in chunks of its token budget and calls
// on_row(position, logits) for every position (the logits predict window[position + 1]); the
// sequence is freed afterwards. Throws Error naming `who` when the KV cache is too small.
void for_each_position_logits(
    Engine& engine, std::span<const std::int32_t> window, const std::string& who,
    const std::function<void(std::size_t, std::span<const float>)>& on_row);

// log(sum(exp(logits))) in float64; with it, -log p(token) = log_sum_exp(logits) - logits[token].
double log_sum_exp(std::span<const float> logits);

}  // namespace tokenscope::runtime
