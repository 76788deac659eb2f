#pragma once
// `tokenscope-cli bench --speculative lookup|draft:PATH`: speculative decoding against plain
// decoding in the same engine and run, on fixed prompts of two kinds: input-grounded (edit this
// code, summarise a paragraph quoting it, answer from a given text), where prompt lookup has
// something to copy, and open-ended ones, where adaptive k must keep speculation from costing.
#include <string>

#include "runtime/engine.h"

namespace tokenscope::cli {

// Runs the comparison (greedy, `n_tokens` per prompt, each prompt plain then speculative, the
// whole set `repeats` times) and prints a table, or JSON when `json`.
void bench_speculation(runtime::Engine& engine, int n_tokens, int repeats, bool json);

}  // namespace tokenscope::cli
