#pragma once
// The memory a model needs: weights, plus the KV cache per token of context. Computed from
// GGUF hyperparameters alone so it works before (and without) loading the model.
#include <cstdint>
#include <optional>
#include <string>

namespace tokenscope::gguf {
class File;
}

namespace tokenscope::inspect {

struct KvShape {
    std::string architecture;
    std::uint64_t layers = 0;
    std::uint64_t kv_heads = 0;
    std::uint64_t key_length = 0;      // per head
    std::uint64_t value_length = 0;    // per head
    std::uint64_t context_length = 0;  // the model's trained maximum (0 when unknown)
};

struct MemoryBudget {
    std::uint64_t weight_bytes = 0;
    std::optional<KvShape> kv;          // absent when the file holds no model hyperparameters
    double kv_bytes_per_element = 2.0;  // F16 cache by default
    // 2 x layers x kv_heads x head_dim x bytes per element (K and V; with separate key and
    // value lengths, layers x kv_heads x (key_length + value_length) x bytes).
    std::uint64_t kv_bytes_per_token() const;
    // The longest context whose KV cache fits beside the weights in `ram_bytes`, capped at the
    // model's context length when it is known. 0 when even the weights do not fit.
    std::uint64_t max_context_for(std::uint64_t ram_bytes) const;
};

// Reads `<arch>.block_count`, `<arch>.attention.head_count(_kv)`, `<arch>.attention.key_length`
// / `value_length` (default: embedding_length / head_count) and `<arch>.context_length`.
// Throws FormatError when the keys exist but are inconsistent (e.g. zero heads).
MemoryBudget memory_budget(const gguf::File& file);

}  // namespace tokenscope::inspect
