// `tokenscope-cli imatrix`: the importance matrix of a model over a calibration text, as
// llama-imatrix computes it: for every weight matrix and input column, the mean squared input
// activation over all tokens (non-overlapping windows of --ctx tokens, each starting with BOS
// when the model wants one). Written in llama.cpp's GGUF imatrix layout (quant/imatrix.h).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "arguments.h"
#include "commands.h"
#include "generation_options.h"
#include "quant/imatrix.h"
#include "quant/imatrix_run.h"
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
    quant::ImatrixRunOptions run_options;
    run_options.ctx = args.value("ctx") ? options.kv_capacity_tokens : 512;
    run_options.engine = options;
    run_options.dataset = text_path;
    const auto max_chunks = args.number("chunks");
    if (max_chunks && (*max_chunks < 1 || *max_chunks != std::floor(*max_chunks))) {
        throw InvalidArgument("'imatrix': option '--chunks' must be a positive whole number");
    }
    if (max_chunks) run_options.max_windows = static_cast<std::size_t>(*max_chunks);
    run_options.progress = [](const quant::ImatrixProgress& p) {
        std::fprintf(stderr,
                     "imatrix: window %u/%u, %lld tokens, %.0f tok/s, perplexity so far %.4f\n",
                     p.window, p.windows, static_cast<long long>(p.tokens), p.tokens_per_second,
                     p.perplexity);
    };
    const quant::ImatrixRun run = quant::compute_imatrix(model_path, buffer.str(), run_options);
    quant::save_imatrix(run.imatrix, out_path);
    std::printf(
        "%s: %zu matrices, %lld tokens in %u windows of up to %lld, perplexity %.4f, %.1f s\n",
        out_path.c_str(), run.imatrix.entries.size(), static_cast<long long>(run.tokens),
        run.windows, static_cast<long long>(run_options.ctx), run.perplexity, run.seconds);
    return 0;
}

}  // namespace tokenscope::cli
