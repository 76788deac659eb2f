#pragma once
// Continuous batching made visible: several requests run through one engine, joining a few
// steps apart, and every step's schedule is recorded (who got a prefill chunk and how many
// tokens, who decoded, who waited, who was preempted), with the aggregate speed against one
// request alone. The app's Tools › Batch demo draws it as a timeline; the numbers come from the
// engine's own scheduler (Engine::last_schedule), not from a model of it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace tokenscope::runtime {

struct BatchDemoOptions {
    std::vector<std::vector<std::int32_t>> prompts;  // token ids, BOS included if wanted
    int max_tokens = 24;                             // per request, greedy
    int stagger_steps = 3;       // request i is submitted before step i * stagger_steps
    bool measure_single = true;  // then the first prompt alone, for the speed comparison
    // After each step; returning false stops the demo (what ran so far is returned).
    std::function<bool(int step)> on_step;
};

struct BatchDemoRequest {
    RequestId id = 0;
    std::int64_t prompt_tokens = 0;
    std::int64_t generated_tokens = 0;
    int submit_step = 0;        // the first step it could be scheduled in
    int first_token_step = -1;  // the step that produced its first token
    int finish_step = -1;       // the step it finished in (-1: did not, the demo was stopped)
    std::string finish_reason;
};

struct BatchDemoStep {
    StepSchedule schedule;
    double ms = 0;
};

struct BatchDemoResult {
    std::vector<BatchDemoRequest> requests;  // in submission order
    std::vector<BatchDemoStep> steps;
    double seconds = 0;
    std::int64_t generated_tokens = 0;
    double tokens_per_second = 0;         // all requests' generated tokens / wall time
    double single_tokens_per_second = 0;  // the first prompt alone (0 when not measured)
    std::uint64_t preemptions = 0;
    bool stopped = false;
};

// Runs on `engine`, which must be idle; throws InvalidArgument without prompts.
BatchDemoResult run_batch_demo(Engine& engine, const BatchDemoOptions& options);

}  // namespace tokenscope::runtime
