#pragma once
// The server's Prometheus metrics (GET /metrics, text exposition format 0.0.4).
//
// Names follow Prometheus conventions (snake_case, base units, _total for counters) under a
// tokenscope_ prefix; the families mirror what vLLM and llama.cpp's server export, so a
// dashboard or the app's remote engine reads them the same way:
//   tokenscope_kv_cache_usage_ratio          gauge      used / total KV blocks
//   tokenscope_requests_running / _waiting   gauge      in the engine / in the queue
//   tokenscope_prompt_tokens_total           counter
//   tokenscope_generation_tokens_total       counter
//   tokenscope_requests_finished_total{reason} counter
//   tokenscope_time_to_first_token_seconds   histogram  arrival -> first token (queue included)
//   tokenscope_time_per_output_token_seconds histogram  gap between a request's tokens
//
// Written by the engine thread, read by HTTP threads: one mutex, held briefly.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tokenscope::server {

class Histogram {
  public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double value);
    // The _bucket{le=...}, _sum and _count lines of family `name`.
    void render(const std::string& name, std::string& out) const;
    std::uint64_t count() const { return count_; }

  private:
    std::vector<double> bounds_;
    std::vector<std::uint64_t> buckets_;  // non-cumulative; rendered cumulatively
    double sum_ = 0.0;
    std::uint64_t count_ = 0;
};

struct Gauges {
    double kv_usage_ratio = 0.0;
    int kv_blocks_used = 0;
    int kv_blocks_total = 0;
    int requests_running = 0;
    int requests_waiting = 0;
};

class Metrics {
  public:
    Metrics();

    void add_prompt_tokens(std::int64_t n);
    void add_generated_tokens(std::int64_t n);
    void finished(const std::string& reason);
    void observe_ttft(double seconds);
    void observe_token_gap(double seconds);

    // The gauges are read at scrape time from the engine loop, not kept here.
    std::string render(const Gauges& gauges) const;

  private:
    mutable std::mutex mutex_;
    std::uint64_t prompt_tokens_ = 0;
    std::uint64_t generated_tokens_ = 0;
    std::map<std::string, std::uint64_t> finished_;
    Histogram ttft_;
    Histogram token_gap_;
};

}  // namespace tokenscope::server
