// `tokenscope-cli ppl`: perplexity of the model over a text file, in non-overlapping windows
// of --ctx tokens (each window starts with BOS when the model wants one); every position after
// the first of a window is scored. PPL = exp(mean negative log-likelihood).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "arguments.h"
#include "commands.h"
#include "generation_options.h"
#include "runtime/window_scoring.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

int run_ppl(int argc, char** argv, int first) {
    const Arguments args("ppl", join({{"model"}, {"file"}, {"json", false}}, engine_option_specs()), argc, argv,
                         first);
    const std::string path = args.required("file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path + ": cannot open");
    std::stringstream buffer;
    buffer << in.rdbuf();
    runtime::EngineOptions options = engine_options(args);
    const std::int64_t ctx = options.kv_capacity_tokens == 4096 && !args.value("ctx") ? 512 : options.kv_capacity_tokens;
    options.kv_capacity_tokens = ctx;
    auto engine = runtime::Engine::load(args.required("model"), options);
    const auto& tok = engine->tokenizer();
    const std::vector<std::int32_t> tokens = tok.encode(buffer.str());
    if (tokens.size() < 2) throw InvalidArgument("ppl: " + path + " has fewer than 2 tokens");
    const auto windows = runtime::split_into_windows(tok, tokens, ctx, "ppl");

    double nll = 0.0;
    std::int64_t scored = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const auto& window : windows) {
        runtime::for_each_position_logits(*engine, window, "ppl", [&](std::size_t pos, std::span<const float> row) {
            if (pos + 1 >= window.size()) return;  // the last position predicts nothing here
            nll += runtime::log_sum_exp(row) - row[static_cast<std::size_t>(window[pos + 1])];
            ++scored;
        });
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double ppl = std::exp(nll / static_cast<double>(scored));
    if (args.flag("json")) {
        JsonWriter w;
        w.begin_object();
        w.key("perplexity").value(ppl);
        w.key("mean_nll").value(nll / static_cast<double>(scored));
        w.key("scored_tokens").value(scored);
        w.key("windows").value(static_cast<std::int64_t>(windows.size()));
        w.key("ctx").value(ctx);
        w.key("seconds").value(seconds);
        w.end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        std::printf("perplexity %.4f over %lld tokens (%lld windows of up to %lld tokens, %.1f s)\n", ppl,
                    static_cast<long long>(scored), static_cast<long long>(windows.size()), static_cast<long long>(ctx), seconds);
    }
    return 0;
}

}  // namespace tokenscope::cli
