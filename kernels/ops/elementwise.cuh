#pragma once
// Element-wise f32 operations on the GPU. Host launchers only.
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::cuda::ops {

void add(float* x, const float* y, std::int64_t n, cudaStream_t s);  // x += y (n floats)
void scale(float* x, float s_, std::int64_t n, cudaStream_t s);      // x *= s_
// x[r][i] += bias[i] for `rows` rows of n floats (the q/k/v biases of Qwen 2, one row a token).
void add_rows(float* x, const float* bias, std::int64_t rows, std::int64_t n, cudaStream_t s);

}  // namespace tokenscope::cuda::ops
