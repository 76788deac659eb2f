#pragma once
// What a server's Prometheus /metrics says about its load, whichever engine it is. Each
// engine names the same few gauges its own way; the names read here are the ones each
// project documents:
//   ours       tokenscope_kv_cache_usage_ratio, tokenscope_kv_cache_blocks_used/_total,
//              tokenscope_requests_running, tokenscope_requests_waiting (app/server/metrics.h)
//   vLLM       vllm:gpu_cache_usage_perc (V0; a 0..1 fraction despite "perc"),
//              vllm:kv_cache_usage_perc (V1), vllm:num_requests_running, vllm:num_requests_waiting
//              (docs.vllm.ai, "Production Metrics")
//   llama.cpp  llamacpp:requests_processing, llamacpp:requests_deferred (tools/server/README.md,
//              "GET /metrics"; needs --metrics); llamacpp:kv_cache_usage_ratio only in older
//              builds (the llama.cpp vendored by llama-cpp-python 0.3.36 no longer exports it)
//   SGLang     sglang:token_usage, sglang:num_running_reqs, sglang:num_queue_reqs
//              (docs.sglang.ai, "Production Metrics"; needs --enable-metrics)
// Whatever is present is used; absent values stay unset. A server with several engines
// (vLLM data parallel: one series per engine label) reports the mean usage and summed counts.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tokenscope::remote {

struct PrometheusSample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0.0;
};

// Prometheus text exposition format 0.0.4. Lines that do not parse are skipped (a scrape is
// advisory: one odd line must not hide the rest).
std::vector<PrometheusSample> parse_prometheus(const std::string& text);

struct ServerMetrics {
    std::string engine;  // "tokenscope", "vllm", "llama.cpp", "sglang"; empty: none recognised
    std::optional<double> kv_usage;  // 0..1
    std::optional<double> kv_blocks_used;
    std::optional<double> kv_blocks_total;
    std::optional<double> requests_running;
    std::optional<double> requests_waiting;
    bool recognised() const { return !engine.empty(); }
};

ServerMetrics read_server_metrics(const std::vector<PrometheusSample>& samples);
inline ServerMetrics read_server_metrics(const std::string& text) {
    return read_server_metrics(parse_prometheus(text));
}

}  // namespace tokenscope::remote
