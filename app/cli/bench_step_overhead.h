#pragma once
// `tokenscope-cli bench`'s measurement of what a decode step costs besides the forward pass:
// sampling (with the inspector's candidate lists), detokenizing and building the token events.
// The decode rows of the bench time Engine::forward alone, so this work would otherwise be
// invisible there; at a 262144-token vocabulary it is not negligible.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace tokenscope::cli {

struct StepOverhead {
    runtime::SamplingParams sampling;  // the settings measured (the desktop app's defaults)
    std::int64_t vocab = 0;
    std::int64_t context = 0;       // prompt tokens before the timed decode steps
    std::int64_t steps = 0;         // Engine::step calls timed (decode steps only)
    double sampling_us = 0;         // one Sampler::sample on a real decode logits row
    double greedy_sampling_us = 0;  // the same row at temperature 0
    double engine_step_us = 0;      // one Engine::step, whole
    double forward_us = 0;          // the part of it up to the forward pass's return
    double after_forward_us = 0;    // the rest: sampling, detokenizing, events

    // The part of a decode step spent outside the forward pass, in [0, 1].
    double share() const { return engine_step_us > 0 ? after_forward_us / engine_step_us : 0; }
};

// The sampling settings a user of the desktop app or of `chat` gets by default, with the
// inspector's candidate lists as long as the app asks for.
runtime::SamplingParams default_app_sampling();

// Times Sampler::sample on `logits` (one real decode row) and a real generation of `steps`
// decode steps through Engine::submit / Engine::step from `prompt`. The engine must have no
// request in flight and KV room for prompt.size() + steps + 1 tokens.
StepOverhead measure_step_overhead(runtime::Engine& engine, std::span<const float> logits,
                                   const std::vector<std::int32_t>& prompt, std::int64_t steps);

}  // namespace tokenscope::cli
