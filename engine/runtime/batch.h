#pragma once
// What one forward step computes: a ragged batch of chunks, each a run of consecutive tokens
// of one sequence at given positions. Prefill chunks and single decode tokens mix freely.
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace tokenscope::inspect {
class AttentionCapture;
}

namespace tokenscope::runtime {

enum class LogitsWanted {
    None,  // a prefill chunk that does not reach the end of the prompt
    Last,  // the chunk's last token (sampling the next token)
    All,   // every token (perplexity, speculative verification)
};

struct SeqChunk {
    kv::SeqId seq = 0;
    std::span<const std::int32_t> tokens;
    std::int64_t start_pos = 0;  // position of tokens[0]; the cache already holds [0, start_pos)
    LogitsWanted logits = LogitsWanted::Last;
    inspect::AttentionCapture* capture = nullptr;  // null: not captured
};

struct Batch {
    std::vector<SeqChunk> chunks;
    std::int64_t total_tokens() const {
        std::int64_t n = 0;
        for (const auto& c : chunks) n += static_cast<std::int64_t>(c.tokens.size());
        return n;
    }
};

struct ForwardOutputs {
    std::int64_t vocab_size = 0;
    // Logit rows, in chunk order: for a chunk with Last one row, with All one per token.
    std::vector<float> logits;
    // first_row[c]: index of chunk c's first logit row (-1 when it has none).
    std::vector<std::int64_t> first_row;

    std::span<const float> row(std::int64_t r) const {
        return {logits.data() + r * vocab_size, static_cast<std::size_t>(vocab_size)};
    }
};

}  // namespace tokenscope::runtime
