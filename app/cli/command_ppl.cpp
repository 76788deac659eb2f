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
    const bool bos = tok.add_bos() && tok.bos_id() >= 0;
    const std::int64_t body = ctx - (bos ? 1 : 0);
    if (static_cast<std::int64_t>(tokens.size()) < 2) throw InvalidArgument("ppl: " + path + " has fewer than 2 tokens");

    double nll = 0.0;
    std::int64_t scored = 0;
    std::int64_t windows = 0;
    runtime::ForwardOutputs out;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t at = 0; at + 1 < tokens.size(); at += static_cast<std::size_t>(body)) {
        std::vector<std::int32_t> window;
        if (bos) window.push_back(tok.bos_id());
        const std::size_t end = std::min(tokens.size(), at + static_cast<std::size_t>(body));
        window.insert(window.end(), tokens.begin() + static_cast<std::ptrdiff_t>(at), tokens.begin() + static_cast<std::ptrdiff_t>(end));
        const kv::SeqId seq = engine->new_sequence_id();
        // Feed the window in chunks of the token budget, keeping every position's logits.
        for (std::size_t pos = 0; pos < window.size();) {
            const std::size_t n = std::min<std::size_t>(window.size() - pos, static_cast<std::size_t>(options.token_budget));
            if (!engine->kv().allocate_slots(seq, static_cast<int>(n))) throw Error("ppl: the KV cache is too small for --ctx");
            runtime::Batch batch;
            batch.chunks.push_back({seq, std::span(window).subspan(pos, n), static_cast<std::int64_t>(pos),
                                    runtime::LogitsWanted::All, nullptr});
            engine->forward(batch, out);
            for (std::size_t i = 0; i < n; ++i) {
                const std::size_t target = pos + i + 1;  // the token this row predicts
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
        ++windows;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double ppl = std::exp(nll / static_cast<double>(scored));
    if (args.flag("json")) {
        JsonWriter w;
        w.begin_object();
        w.key("perplexity").value(ppl);
        w.key("mean_nll").value(nll / static_cast<double>(scored));
        w.key("scored_tokens").value(scored);
        w.key("windows").value(windows);
        w.key("ctx").value(ctx);
        w.key("seconds").value(seconds);
        w.end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        std::printf("perplexity %.4f over %lld tokens (%lld windows of up to %lld tokens, %.1f s)\n", ppl,
                    static_cast<long long>(scored), static_cast<long long>(windows), static_cast<long long>(ctx), seconds);
    }
    return 0;
}

}  // namespace tokenscope::cli
