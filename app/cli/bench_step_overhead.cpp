#include "bench_step_overhead.h"

#include <algorithm>
#include <chrono>

namespace tokenscope::cli {

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// Mean microseconds of one Sampler::sample on `logits`. Repeats for at least 32 calls and
// 0.2 s, so that a 49k vocabulary (tens of microseconds a call) is timed as well as a 262k one.
double time_sampler(const runtime::SamplingParams& params, std::span<const float> logits,
                    std::span<const std::int32_t> history) {
    runtime::Sampler sampler(params);
    sampler.sample(logits, history);  // first touch of the scratch buffers
    std::int64_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    while (calls < 32 || (elapsed < 2e5 && calls < 100000)) {
        sampler.sample(logits, history);
        ++calls;
        elapsed = us_since(start);
    }
    return elapsed / static_cast<double>(calls);
}

}  // namespace

runtime::SamplingParams default_app_sampling() {
    // SamplingParams' own defaults are the app's and `chat`'s (ui::SamplingSettings and
    // sampling_params() start from the same values); the app's token inspector asks for 20
    // candidates (kCandidates in app/gui/inference_worker.cpp), `chat` for the default 10.
    runtime::SamplingParams p;
    p.n_candidates = 20;
    p.seed = 1234;
    return p;
}

StepOverhead measure_step_overhead(runtime::Engine& engine, std::span<const float> logits,
                                   const std::vector<std::int32_t>& prompt, std::int64_t steps) {
    StepOverhead r;
    r.sampling = default_app_sampling();
    r.vocab = static_cast<std::int64_t>(logits.size());
    r.context = static_cast<std::int64_t>(prompt.size());
    r.sampling_us = time_sampler(r.sampling, logits, prompt);
    runtime::SamplingParams greedy = r.sampling;
    greedy.temperature = 0.0f;
    r.greedy_sampling_us = time_sampler(greedy, logits, prompt);

    // A real generation. The step that prefills the prompt is not timed; a request that ends
    // early (EOS) is followed by a new one until `steps` decode steps are timed. The cap on
    // calls keeps a model that always ends at once from looping for ever.
    double step_us = 0, forward_ms = 0;
    runtime::RequestId request_id = 0;
    for (std::int64_t calls = 0; r.steps < steps && calls < 4 * steps + 16; ++calls) {
        if (!engine.has_work()) {
            runtime::Request request;
            request.prompt = prompt;
            request.sampling = r.sampling;
            request.max_tokens = static_cast<int>(steps + 1);
            request_id = engine.submit(std::move(request));
        }
        const auto start = Clock::now();
        const std::vector<runtime::TokenEvent> events = engine.step();
        const double us = us_since(start);
        for (const auto& e : events) {
            if (e.token < 0 || e.timings.generated_tokens < 2) continue;
            // token_ms is the step's time from its start to the forward pass's return.
            step_us += us;
            forward_ms += e.timings.token_ms;
            ++r.steps;
        }
    }
    // A request still running when the count was reached: cancelled requests finish at the
    // next step without a forward pass.
    if (engine.has_work()) {
        engine.cancel(request_id);
        engine.step();
    }
    if (r.steps > 0) {
        const auto n = static_cast<double>(r.steps);
        r.engine_step_us = step_us / n;
        r.forward_us = std::min(forward_ms * 1000.0 / n, r.engine_step_us);
        r.after_forward_us = r.engine_step_us - r.forward_us;
    }
    return r;
}

}  // namespace tokenscope::cli
