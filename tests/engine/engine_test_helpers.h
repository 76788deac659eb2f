#pragma once
// Shared by the engine suites: load a real model for a reference check, and run the engine's
// forward pass directly on one sequence.
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace tokenscope::test {

// A real model file loaded as the float64 reference checks want it: 2 threads, room for 1024
// tokens, and an F32 KV cache so that the cache adds no rounding of its own.
inline std::unique_ptr<runtime::Engine> load_for_reference_check(const std::string& path) {
    runtime::EngineOptions o;
    o.threads = 2;
    o.kv_capacity_tokens = 1024;
    o.kv_type = kv::ElementType::F32;
    return runtime::Engine::load(path, o);
}

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
