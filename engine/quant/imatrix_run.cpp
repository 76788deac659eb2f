#include "quant/imatrix_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/cpu_backend.h"
#include "runtime/window_scoring.h"
#include "util/error.h"

namespace tokenscope::quant {

namespace {

// Detaches the collector however the run ends (a throwing progress callback included).
struct ObserverGuard {
    runtime::CpuBackend* cpu;
    ~ObserverGuard() { cpu->set_matmul_observer(nullptr); }
};

}  // namespace

ImatrixRun compute_imatrix(const std::string& model_path, const std::string& text,
                           const ImatrixRunOptions& options) {
    runtime::EngineOptions engine_options = options.engine;
    engine_options.kv_capacity_tokens = options.ctx;
    engine_options.device = runtime::Device::Cpu;
    auto engine = runtime::Engine::load(model_path, engine_options);
    auto* cpu = dynamic_cast<runtime::CpuBackend*>(&engine->backend());
    if (!cpu) throw InvalidArgument("imatrix: needs the CPU backend");
    ImatrixCollector collector(engine->file());
    cpu->set_matmul_observer(&collector);
    const ObserverGuard guard{cpu};

    const auto& tok = engine->tokenizer();
    const std::vector<std::int32_t> tokens = tok.encode(text);
    if (tokens.size() < 2) {
        throw InvalidArgument(
            "imatrix: " + (options.dataset.empty() ? "the calibration text" : options.dataset) +
            " has fewer than 2 tokens");
    }
    auto windows = runtime::split_into_windows(tok, tokens, options.ctx, "imatrix");
    if (options.max_windows > 0) windows.resize(std::min(windows.size(), options.max_windows));

    ImatrixRun run;
    double nll = 0.0;
    std::int64_t scored = 0;
    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    for (const auto& window : windows) {
        runtime::for_each_position_logits(
            *engine, window, "imatrix", [&](std::size_t pos, std::span<const float> row) {
                if (pos + 1 >= window.size()) return;
                nll += runtime::log_sum_exp(row) - row[static_cast<std::size_t>(window[pos + 1])];
                ++scored;
            });
        run.tokens += static_cast<std::int64_t>(window.size());
        ++run.windows;
        run.perplexity = std::exp(nll / static_cast<double>(std::max<std::int64_t>(scored, 1)));
        if (options.progress) {
            options.progress({run.windows, static_cast<std::uint32_t>(windows.size()), run.tokens,
                              static_cast<double>(run.tokens) / elapsed(), run.perplexity});
        }
    }
    run.imatrix = std::move(collector.imatrix());
    run.imatrix.datasets = {options.dataset};
    run.imatrix.chunk_count = run.windows;
    run.imatrix.chunk_size = static_cast<std::uint32_t>(options.ctx);
    run.seconds = elapsed();
    return run;
}

}  // namespace tokenscope::quant
