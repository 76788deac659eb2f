#pragma once
// Synthetic Llama-architecture models with seeded random weights in any format we can write:
// benchmarks at realistic sizes (`make-model`) and the CUDA self-test's whole-model checks.
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
};

// Throws InvalidArgument for an inconsistent shape, IoError when the file cannot be written.
void write_synthetic_llama(const std::string& path, tensor::Type type, const SyntheticShape& shape);

}  // namespace tokenscope::cli
