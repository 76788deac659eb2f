#pragma once
// Shared by the engine suites: run the engine's forward pass directly on one sequence.
#include <vector>

#include "runtime/engine.h"

namespace tokenscope::test {

// Feeds `tokens` to a fresh sequence in chunks of at most `chunk` tokens and returns the logits
// of every position, in order.
inline std::vector<std::vector<float>> run_sequence(runtime::Engine& engine, std::span<const std::int32_t> tokens,
                                                    std::int64_t chunk, inspect::AttentionCapture* capture = nullptr) {
    const kv::SeqId seq = engine.new_sequence_id();
    std::vector<std::vector<float>> rows;
    runtime::ForwardOutputs out;
    for (std::int64_t start = 0; start < static_cast<std::int64_t>(tokens.size()); start += chunk) {
        const std::int64_t n = std::min<std::int64_t>(chunk, static_cast<std::int64_t>(tokens.size()) - start);
        if (!engine.kv().allocate_slots(seq, static_cast<int>(n))) throw std::runtime_error("kv cache full");
        runtime::Batch batch;
        batch.chunks.push_back({seq, tokens.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(n)), start,
                                runtime::LogitsWanted::All, capture});
        engine.forward(batch, out);
        for (std::int64_t r = 0; r < n; ++r) {
            const auto row = out.row(out.first_row[0] + r);
            rows.emplace_back(row.begin(), row.end());
        }
    }
    engine.kv().free_sequence(seq);
    return rows;
}

}  // namespace tokenscope::test
