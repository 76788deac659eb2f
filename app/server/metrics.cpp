#include "metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace tokenscope::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), buckets_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
    const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);  // first le >= value
    ++buckets_[static_cast<std::size_t>(it - bounds_.begin())];
    sum_ += value;
    ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += buckets_[i];
        out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
    }
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
    out += fmt::format("{}_sum {}\n", name, sum_);
    out += fmt::format("{}_count {}\n", name, count_);
}

Metrics::Metrics()
    // TTFT spans a cached one-token prefill to a long prompt waiting in the queue; the token gap
    // a GPU's few milliseconds to a big CPU model's second.
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      token_gap_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::add_prompt_tokens(std::int64_t n) {
    std::lock_guard lock(mutex_);
    prompt_tokens_ += static_cast<std::uint64_t>(n);
}

void Metrics::add_generated_tokens(std::int64_t n) {
    std::lock_guard lock(mutex_);
    generated_tokens_ += static_cast<std::uint64_t>(n);
}

void Metrics::finished(const std::string& reason) {
    std::lock_guard lock(mutex_);
    ++finished_[reason];
}

void Metrics::observe_ttft(double seconds) {
    std::lock_guard lock(mutex_);
    ttft_.observe(seconds);
}

void Metrics::observe_token_gap(double seconds) {
    std::lock_guard lock(mutex_);
    token_gap_.observe(seconds);
}

std::string Metrics::render(const Gauges& gauges) const {
    std::lock_guard lock(mutex_);
    std::string out;
    auto family = [&](const char* name, const char* type, const char* help) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    };
    family("tokenscope_kv_cache_usage_ratio", "gauge", "KV cache blocks in use, 0 to 1.");
    out += fmt::format("tokenscope_kv_cache_usage_ratio {}\n", gauges.kv_usage_ratio);
    family("tokenscope_kv_cache_blocks_used", "gauge", "KV cache blocks in use.");
    out += fmt::format("tokenscope_kv_cache_blocks_used {}\n", gauges.kv_blocks_used);
    family("tokenscope_kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.");
    out += fmt::format("tokenscope_kv_cache_blocks_total {}\n", gauges.kv_blocks_total);
    family("tokenscope_requests_running", "gauge", "Requests the engine is generating for.");
    out += fmt::format("tokenscope_requests_running {}\n", gauges.requests_running);
    family("tokenscope_requests_waiting", "gauge", "Requests queued for a free engine slot.");
    out += fmt::format("tokenscope_requests_waiting {}\n", gauges.requests_waiting);
    family("tokenscope_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
    out += fmt::format("tokenscope_prompt_tokens_total {}\n", prompt_tokens_);
    family("tokenscope_generation_tokens_total", "counter", "Tokens generated.");
    out += fmt::format("tokenscope_generation_tokens_total {}\n", generated_tokens_);
    family("tokenscope_requests_finished_total", "counter", "Finished requests by finish reason.");
    for (const auto& [reason, n] : finished_) {
        out += fmt::format("tokenscope_requests_finished_total{{reason=\"{}\"}} {}\n", reason, n);
    }
    family("tokenscope_time_to_first_token_seconds", "histogram",
           "From a request's arrival (queue included) to its first token.");
    ttft_.render("tokenscope_time_to_first_token_seconds", out);
    family("tokenscope_time_per_output_token_seconds", "histogram",
           "Time between consecutive tokens of a request.");
    token_gap_.render("tokenscope_time_per_output_token_seconds", out);
    return out;
}

}  // namespace tokenscope::server
