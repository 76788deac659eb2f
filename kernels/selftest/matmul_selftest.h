#pragma once
// Self-test of kernels/matmul against the CPU: every weight format, the fused GEMV (few tokens)
// and the dequantize + cuBLAS path (many tokens), each compared with a float64 reference computed
// from tensor::dequantize_row. Needs a CUDA device; throws tokenscope::Error when CUDA fails
// (e.g. no device), so callers check for a device first.
#include <cstdint>
#include <string>
#include <vector>

namespace tokenscope::cuda {

struct MatmulCheck {
    std::string name;       // "Q4_K rows=131 cols=512 tokens=4"
    std::string precision;  // "f32 gemv", "f32 cublas", "f16 cublas", "bf16 cublas"
    double rel_error = 0;   // ||gpu - reference|| / ||reference|| over the whole output
    double tolerance = 0;
    bool passed = false;
};

// Deterministic for a given seed (shapes and data both come from it).
std::vector<MatmulCheck> check_matmul(std::uint64_t seed);

}  // namespace tokenscope::cuda
