#include "runtime/batch_demo.h"

#include <chrono>
#include <map>

#include "util/error.h"

namespace tokenscope::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

Request greedy_request(const std::vector<std::int32_t>& prompt, int max_tokens) {
    Request r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.speculate = false;  // the timeline shows plain decode steps
    return r;
}

}  // namespace

BatchDemoResult run_batch_demo(Engine& engine, const BatchDemoOptions& options) {
    if (options.prompts.empty()) throw InvalidArgument("batch demo: no prompts");
    if (engine.has_work()) throw InvalidArgument("batch demo: the engine is busy");
    BatchDemoResult result;
    const std::uint64_t preemptions_before = engine.preemptions();
    std::map<RequestId, std::size_t> index;
    const std::size_t n = options.prompts.size();
    const int stagger = std::max(0, options.stagger_steps);
    std::size_t submitted = 0;
    const auto start = Clock::now();
    for (int step = 0;; ++step) {
        while (submitted < n && static_cast<int>(submitted) * stagger <= step) {
            BatchDemoRequest r;
            r.id = engine.submit(greedy_request(options.prompts[submitted], options.max_tokens));
            r.prompt_tokens = static_cast<std::int64_t>(options.prompts[submitted].size());
            r.submit_step = step;
            index[r.id] = result.requests.size();
            result.requests.push_back(r);
            ++submitted;
        }
        if (!engine.has_work() && submitted == n) break;
        const auto step_start = Clock::now();
        const std::vector<TokenEvent> events = engine.step();
        BatchDemoStep s;
        s.schedule = engine.last_schedule();
        s.ms = seconds_since(step_start) * 1000.0;
        result.steps.push_back(std::move(s));
        for (const TokenEvent& e : events) {
            const auto it = index.find(e.request);
            if (it == index.end()) continue;
            BatchDemoRequest& r = result.requests[it->second];
            if (e.token >= 0) {
                ++r.generated_tokens;
                if (r.first_token_step < 0) r.first_token_step = step;
            }
            if (e.finished) {
                r.finish_step = step;
                r.finish_reason = finish_reason_name(e.reason);
            }
        }
        if (options.on_step && !options.on_step(step)) {
            for (const auto& r : result.requests) {
                if (r.finish_step < 0) engine.cancel(r.id);
            }
            while (engine.has_work()) engine.step();  // lets the cancels release their blocks
            result.stopped = true;
            break;
        }
    }
    result.seconds = seconds_since(start);
    for (const auto& r : result.requests) result.generated_tokens += r.generated_tokens;
    if (result.seconds > 0)
        result.tokens_per_second = static_cast<double>(result.generated_tokens) / result.seconds;
    result.preemptions = engine.preemptions() - preemptions_before;

    if (options.measure_single && !result.stopped) {
        const auto single_start = Clock::now();
        engine.submit(greedy_request(options.prompts.front(), options.max_tokens));
        std::int64_t tokens = 0;
        while (engine.has_work()) {
            for (const TokenEvent& e : engine.step()) tokens += e.token >= 0 ? 1 : 0;
        }
        const double seconds = seconds_since(single_start);
        if (seconds > 0) result.single_tokens_per_second = static_cast<double>(tokens) / seconds;
    }
    return result;
}

}  // namespace tokenscope::runtime
