#pragma once
// Synthetic models with seeded random weights in any format we can write: Llama-architecture
// ones for benchmarks at realistic sizes (`make-model`), and one of each supported feature
// (Qwen 2 biases, Qwen 3 q/k norms, Phi-3 fused matrices, Llama 3.x rope_freqs) for the CUDA self-test's
// whole-model checks.
#include <cstdint>
#include <string>

#include "tensor/type.h"

namespace tokenscope::cli {

struct SyntheticShape {
    std::int64_t width = 1024;
    std::int64_t layers = 16;
    std::int64_t heads = 16;
    std::int64_t kv_heads = 4;
    std::int64_t ffn = 2816;
    std::int64_t vocab = 32000;
    std::uint64_t seed = 1;
    std::string architecture = "llama";  // "llama", "qwen2" (q/k/v biases), "qwen3" (q/k norms), "phi3" (fused)
    std::int64_t head_dim = 0;           // 0: width / heads; else written as attention.key_length
    bool rope_freqs = false;             // a rope_freqs.weight tensor (Llama 3.x scaling factors)
};

// Throws InvalidArgument for an inconsistent shape, IoError when the file cannot be written.
void write_synthetic_model(const std::string& path, tensor::Type type, const SyntheticShape& shape);

}  // namespace tokenscope::cli
