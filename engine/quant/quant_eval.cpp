#include "quant/quant_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "runtime/engine.h"
#include "runtime/window_scoring.h"
#include "util/error.h"

namespace tokenscope::quant {

namespace {

std::size_t argmax(std::span<const float> v) {
    return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

struct Accumulator {
    double nll = 0.0;
    std::int64_t scored = 0;
    std::int64_t agree = 0;
    std::vector<double> kl;
};

// Every position's logits of `window` in `out` (rows in order).
void run_window(runtime::Engine& engine, std::span<const std::int32_t> window,
                std::vector<float>& out) {
    const auto vocab = static_cast<std::size_t>(engine.config().vocab_size);
    out.resize(window.size() * vocab);
    runtime::for_each_position_logits(
        engine, window, "quant-eval", [&](std::size_t pos, std::span<const float> row) {
            std::copy(row.begin(), row.end(),
                      out.begin() + static_cast<std::ptrdiff_t>(pos * vocab));
        });
}

double decode_speed(runtime::Engine& engine, std::span<const std::int32_t> prompt, int steps) {
    if (steps <= 0 || prompt.empty()) return 0.0;
    const kv::SeqId seq = engine.new_sequence_id();
    runtime::ForwardOutputs fo;
    if (!engine.kv().allocate_slots(seq, static_cast<int>(prompt.size())))
        throw Error("quant-eval: the KV cache is too small");
    runtime::Batch batch;
    batch.chunks.push_back({seq, prompt, 0, runtime::LogitsWanted::Last, nullptr});
    engine.forward(batch, fo);
    std::int32_t token = static_cast<std::int32_t>(argmax(fo.row(0)));
    auto pos = static_cast<std::int64_t>(prompt.size());
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    for (; done < steps && pos < engine.options().kv_capacity_tokens; ++done, ++pos) {
        if (!engine.kv().allocate_slots(seq, 1)) break;
        runtime::Batch step;
        step.chunks.push_back({seq, std::span<const std::int32_t>(&token, 1), pos,
                               runtime::LogitsWanted::Last, nullptr});
        engine.forward(step, fo);
        token = static_cast<std::int32_t>(argmax(fo.row(0)));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    engine.kv().free_sequence(seq);
    return done > 0 && seconds > 0 ? done / seconds : 0.0;
}

void describe_file(const runtime::Engine& engine, const std::string& path, ModelEval& m) {
    m.path = path;
    m.file_bytes = static_cast<std::uint64_t>(std::filesystem::file_size(path));
    double bytes = 0, elements = 0;
    for (const auto& t : engine.file().tensors()) {
        bytes += static_cast<double>(t.byte_size);
        elements += static_cast<double>(t.element_count);
    }
    m.bits_per_weight = elements > 0 ? bytes * 8.0 / elements : 0.0;
}

}  // namespace

void log_softmax(std::span<const float> logits, std::span<float> out) {
    const double lse = runtime::log_sum_exp(logits);
    for (std::size_t i = 0; i < logits.size(); ++i)
        out[i] = static_cast<float>(static_cast<double>(logits[i]) - lse);
}

namespace {

// KL(P || Q) with P = softmax(base) given its log-sum-exp, Q = softmax(logits); float64 throughout,
// so identical rows give exactly 0.
double kl_with_base_lse(std::span<const float> base, double base_lse,
                        std::span<const float> logits) {
    const double lse = runtime::log_sum_exp(logits);
    double kl = 0.0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
        const double lp = static_cast<double>(base[i]) - base_lse;
        const double p = std::exp(lp);
        if (p == 0.0) continue;
        kl += p * (lp - (static_cast<double>(logits[i]) - lse));
    }
    return std::max(0.0, kl);
}

}  // namespace

double kl_divergence(std::span<const float> base_logits, std::span<const float> logits) {
    return kl_with_base_lse(base_logits, runtime::log_sum_exp(base_logits), logits);
}

EvalResult evaluate_quantizations(const EvalOptions& options) {
    auto say = [&](const std::string& line) {
        if (options.progress) options.progress(line);
    };
    runtime::EngineOptions eo;
    eo.threads = options.threads;
    eo.kv_capacity_tokens = options.ctx;
    eo.token_budget = std::min<std::int64_t>(512, options.ctx);
    auto base = runtime::Engine::load(options.base, eo);
    std::vector<std::unique_ptr<runtime::Engine>> models;
    for (const std::string& path : options.models) {
        models.push_back(runtime::Engine::load(path, eo));
        if (models.back()->config().vocab_size != base->config().vocab_size) {
            throw InvalidArgument("quant-eval: " + path + " has a vocabulary of " +
                                  std::to_string(models.back()->config().vocab_size) +
                                  " tokens, the base " + options.base + " " +
                                  std::to_string(base->config().vocab_size) +
                                  ": not a quantization of the same model");
        }
    }
    const auto& tok = base->tokenizer();
    const std::vector<std::int32_t> tokens = tok.encode(options.text);
    const auto windows = runtime::split_into_windows(tok, tokens, options.ctx, "quant-eval");

    const auto vocab = static_cast<std::size_t>(base->config().vocab_size);
    EvalResult result;
    result.tokens = static_cast<std::int64_t>(tokens.size());
    result.ctx = options.ctx;
    Accumulator base_acc;
    std::vector<Accumulator> acc(models.size());
    std::vector<float> base_lp, logits;
    const std::size_t n_windows = windows.size();
    for (const auto& window : windows) {
        ++result.windows;
        say("window " + std::to_string(result.windows) + "/" + std::to_string(n_windows) +
            ": base");
        run_window(*base, window, base_lp);
        // Positions 0..size-2 predict the next token of the window.
        const std::size_t scored = window.size() - 1;
        std::vector<double> base_lse(scored);
        std::vector<std::size_t> base_top(scored);
        for (std::size_t i = 0; i < scored; ++i) {
            // Raw logits and their log-sum-exp are kept (not float log-probabilities), and the
            // same expressions serve the models below, so the base against itself gives 0.
            const std::span<const float> row(base_lp.data() + i * vocab, vocab);
            base_lse[i] = runtime::log_sum_exp(row);
            base_top[i] = argmax(row);
            base_acc.nll -=
                static_cast<double>(row[static_cast<std::size_t>(window[i + 1])]) - base_lse[i];
            ++base_acc.scored;
        }
        for (std::size_t m = 0; m < models.size(); ++m) {
            say("window " + std::to_string(result.windows) + "/" + std::to_string(n_windows) +
                ": " + options.models[m]);
            run_window(*models[m], window, logits);
            for (std::size_t i = 0; i < scored; ++i) {
                const std::span<const float> lp(base_lp.data() + i * vocab, vocab);
                const std::span<const float> row(logits.data() + i * vocab, vocab);
                const double lse = runtime::log_sum_exp(row);
                acc[m].nll -=
                    static_cast<double>(row[static_cast<std::size_t>(window[i + 1])]) - lse;
                acc[m].kl.push_back(kl_with_base_lse(lp, base_lse[i], row));
                acc[m].agree += base_top[i] == argmax(row) ? 1 : 0;
                ++acc[m].scored;
            }
        }
    }

    const std::span<const std::int32_t> prompt(tokens.data(),
                                               std::min<std::size_t>(tokens.size(), 16));
    describe_file(*base, options.base, result.base);
    result.base.scored = base_acc.scored;
    result.base.perplexity = std::exp(base_acc.nll / static_cast<double>(base_acc.scored));
    result.base.top1_agreement = 1.0;
    say("decode speed: base");
    result.base.decode_tokens_per_second = decode_speed(*base, prompt, options.decode_tokens);
    for (std::size_t m = 0; m < models.size(); ++m) {
        ModelEval e;
        describe_file(*models[m], options.models[m], e);
        e.scored = acc[m].scored;
        e.perplexity = std::exp(acc[m].nll / static_cast<double>(acc[m].scored));
        e.delta_perplexity = e.perplexity - result.base.perplexity;
        std::vector<double>& kl = acc[m].kl;
        double sum = 0;
        for (double v : kl) sum += v;
        e.kl_mean = sum / static_cast<double>(kl.size());
        std::sort(kl.begin(), kl.end());
        // Nearest rank: the smallest value with at least 99 % of the positions at or below it.
        const auto rank =
            static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(kl.size())));
        e.kl_p99 = kl[std::min(kl.size() - 1, rank > 0 ? rank - 1 : 0)];
        e.kl_max = kl.back();
        e.top1_agreement = static_cast<double>(acc[m].agree) / static_cast<double>(acc[m].scored);
        say("decode speed: " + options.models[m]);
        e.decode_tokens_per_second = decode_speed(*models[m], prompt, options.decode_tokens);
        result.models.push_back(e);
    }
    return result;
}

}  // namespace tokenscope::quant
