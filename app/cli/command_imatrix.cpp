// `tokenscope-cli imatrix`: the importance matrix of a model over a calibration text, as
// llama-imatrix computes it: for every weight matrix and input column, the mean squared input
// activation over all tokens (non-overlapping windows of --ctx tokens, each starting with BOS
// when the model wants one). Written in llama.cpp's GGUF imatrix layout (quant/imatrix.h).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "arguments.h"
#include "commands.h"
#include "generation_options.h"
#include "quant/imatrix.h"
#include "runtime/cpu_backend.h"
#include "runtime/window_scoring.h"
#include "util/error.h"

namespace tokenscope::cli {

int run_imatrix(int argc, char** argv, int first) {
    const Arguments args("imatrix",
                         join({{"model"}, {"file"}, {"out"}, {"chunks"}}, engine_option_specs()),
                         argc, argv, first);
    const std::string model_path = args.required("model");
    const std::string text_path = args.required("file");
    const std::string out_path = args.required("out");
    std::ifstream in(text_path, std::ios::binary);
    if (!in) throw IoError(text_path + ": cannot open");
    std::stringstream buffer;
    buffer << in.rdbuf();
    runtime::EngineOptions options = engine_options(args);
    const std::int64_t ctx = args.value("ctx") ? options.kv_capacity_tokens : 512;
    options.kv_capacity_tokens = ctx;
    options.device = runtime::Device::Cpu;
    const auto max_chunks = args.number("chunks");
    if (max_chunks && (*max_chunks < 1 || *max_chunks != std::floor(*max_chunks))) {
        throw InvalidArgument("'imatrix': option '--chunks' must be a positive whole number");
    }
    auto engine = runtime::Engine::load(model_path, options);
    auto* cpu = dynamic_cast<runtime::CpuBackend*>(&engine->backend());
    if (!cpu) throw InvalidArgument("imatrix: needs the CPU backend");
    quant::ImatrixCollector collector(engine->file());
    cpu->set_matmul_observer(&collector);

    const auto& tok = engine->tokenizer();
    const std::vector<std::int32_t> tokens = tok.encode(buffer.str());
    if (tokens.size() < 2)
        throw InvalidArgument("imatrix: " + text_path + " has fewer than 2 tokens");
    auto all_windows = runtime::split_into_windows(tok, tokens, ctx, "imatrix");
    if (max_chunks)
        all_windows.resize(std::min(all_windows.size(), static_cast<std::size_t>(*max_chunks)));

    double nll = 0.0;
    std::int64_t scored = 0;
    std::int64_t seen = 0;
    std::uint32_t windows = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const auto& window : all_windows) {
        runtime::for_each_position_logits(
            *engine, window, "imatrix", [&](std::size_t pos, std::span<const float> row) {
                if (pos + 1 >= window.size()) return;
                nll += runtime::log_sum_exp(row) - row[static_cast<std::size_t>(window[pos + 1])];
                ++scored;
            });
        seen += static_cast<std::int64_t>(window.size());
        ++windows;
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(
            stderr, "imatrix: window %u/%zu, %lld tokens, %.0f tok/s, perplexity so far %.4f\n",
            windows, all_windows.size(), static_cast<long long>(seen),
            static_cast<double>(seen) / seconds, std::exp(nll / static_cast<double>(scored)));
    }
    cpu->set_matmul_observer(nullptr);
    quant::Imatrix& m = collector.imatrix();
    m.datasets = {text_path};
    m.chunk_count = windows;
    m.chunk_size = static_cast<std::uint32_t>(ctx);
    quant::save_imatrix(m, out_path);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "%s: %zu matrices, %lld tokens in %u windows of up to %lld, perplexity %.4f, %.1f s\n",
        out_path.c_str(), m.entries.size(), static_cast<long long>(seen), windows,
        static_cast<long long>(ctx), std::exp(nll / static_cast<double>(scored)), seconds);
    return 0;
}

}  // namespace tokenscope::cli
