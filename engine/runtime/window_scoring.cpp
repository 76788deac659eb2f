#include "runtime/window_scoring.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace tokenscope::runtime {

std::vector<std::vector<std::int32_t>> split_into_windows(const tokenizer::Tokenizer& tokenizer,
                                                          std::span<const std::int32_t> tokens,
                                                          std::int64_t ctx,
                                                          const std::string& who) {
    const bool bos = tokenizer.add_bos() && tokenizer.bos_id() >= 0;
    const std::int64_t body = ctx - (bos ? 1 : 0);
    if (tokens.size() < 2) throw InvalidArgument(who + ": the text has fewer than 2 tokens");
    if (body < 2) throw InvalidArgument(who + ": --ctx " + std::to_string(ctx) + " is too small");
    std::vector<std::vector<std::int32_t>> windows;
    for (std::size_t at = 0; at + 1 < tokens.size(); at += static_cast<std::size_t>(body)) {
        std::vector<std::int32_t>& window = windows.emplace_back();
        if (bos) window.push_back(tokenizer.bos_id());
        const std::size_t end = std::min(tokens.size(), at + static_cast<std::size_t>(body));
        window.insert(window.end(), tokens.begin() + static_cast<std::ptrdiff_t>(at),
                      tokens.begin() + static_cast<std::ptrdiff_t>(end));
    }
    return windows;
}

void for_each_position_logits(
    Engine& engine, std::span<const std::int32_t> window, const std::string& who,
    const std::function<void(std::size_t, std::span<const float>)>& on_row) {
    const kv::SeqId seq = engine.new_sequence_id();
    const auto budget =
        static_cast<std::size_t>(std::max<std::int64_t>(1, engine.options().token_budget));
    ForwardOutputs out;
    for (std::size_t pos = 0; pos < window.size();) {
        const std::size_t n = std::min(window.size() - pos, budget);
        if (!engine.kv().allocate_slots(seq, static_cast<int>(n))) {
            engine.kv().free_sequence(seq);
            throw Error(who + ": the KV cache is too small for --ctx");
        }
        Batch batch;
        batch.chunks.push_back({seq, window.subspan(pos, n), static_cast<std::int64_t>(pos),
                                LogitsWanted::All, nullptr});
        engine.forward(batch, out);
        for (std::size_t i = 0; i < n; ++i)
            on_row(pos + i, out.row(out.first_row[0] + static_cast<std::int64_t>(i)));
        pos += n;
    }
    engine.kv().free_sequence(seq);
}

double log_sum_exp(std::span<const float> logits) {
    double max = logits[0];
    for (float v : logits) max = std::max(max, static_cast<double>(v));
    double sum = 0.0;
    for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
    return max + std::log(sum);
}

}  // namespace tokenscope::runtime
