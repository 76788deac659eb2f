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
    const bool bos = tok.add_bos() && tok.bos_id() >= 0;
    const std::int64_t body = ctx - (bos ? 1 : 0);
    if (tokens.size() < 2)
        throw InvalidArgument("imatrix: " + text_path + " has fewer than 2 tokens");
    std::size_t windows_total =
        (tokens.size() - 1 + static_cast<std::size_t>(body) - 1) / static_cast<std::size_t>(body);
    if (max_chunks) windows_total = std::min(windows_total, static_cast<std::size_t>(*max_chunks));

    double nll = 0.0;
    std::int64_t scored = 0;
    std::int64_t seen = 0;
    std::uint32_t windows = 0;
    runtime::ForwardOutputs out;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t at = 0; at + 1 < tokens.size() && windows < windows_total;
         at += static_cast<std::size_t>(body)) {
        std::vector<std::int32_t> window;
        if (bos) window.push_back(tok.bos_id());
        const std::size_t end = std::min(tokens.size(), at + static_cast<std::size_t>(body));
        window.insert(window.end(), tokens.begin() + static_cast<std::ptrdiff_t>(at),
                      tokens.begin() + static_cast<std::ptrdiff_t>(end));
        const kv::SeqId seq = engine->new_sequence_id();
        for (std::size_t pos = 0; pos < window.size();) {
            const std::size_t n = std::min<std::size_t>(
                window.size() - pos, static_cast<std::size_t>(options.token_budget));
            if (!engine->kv().allocate_slots(seq, static_cast<int>(n)))
                throw Error("imatrix: the KV cache is too small for --ctx");
            runtime::Batch batch;
            batch.chunks.push_back({seq, std::span(window).subspan(pos, n),
                                    static_cast<std::int64_t>(pos), runtime::LogitsWanted::All,
                                    nullptr});
            engine->forward(batch, out);
            for (std::size_t i = 0; i < n; ++i) {
                const std::size_t target = pos + i + 1;
                if (target >= window.size()) continue;
                const auto row = out.row(out.first_row[0] + static_cast<std::int64_t>(i));
                double max = row[0];
                for (float v : row) max = std::max(max, static_cast<double>(v));
                double sum = 0.0;
                for (float v : row) sum += std::exp(static_cast<double>(v) - max);
                nll += (max + std::log(sum)) - row[static_cast<std::size_t>(window[target])];
                ++scored;
            }
            pos += n;
        }
        engine->kv().free_sequence(seq);
        seen += static_cast<std::int64_t>(window.size());
        ++windows;
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(
            stderr, "imatrix: window %u/%zu, %lld tokens, %.0f tok/s, perplexity so far %.4f\n",
            windows, windows_total, static_cast<long long>(seen),
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
