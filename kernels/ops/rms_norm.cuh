#pragma once
// RMSNorm of rows on the GPU. Host launcher only.
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::cuda::ops {

// For each of `rows` rows of n floats: out = x / sqrt(mean(x^2) + eps) * weight.
// weight: n floats or nullptr (no scaling). out may equal x (in place). Used for the model norms
// (rows = tokens, n = width) and the per-head QK-norm (rows = tokens * heads, n = head_dim).
// Sum of squares accumulated in f32 (per-thread partial sums, then a tree).
void rms_norm(const float* x, const float* weight, float* out, int rows, int n, float eps,
              cudaStream_t s);

}  // namespace tokenscope::cuda::ops
