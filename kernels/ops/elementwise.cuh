#pragma once
// Element-wise f32 operations on the GPU. Host launchers only.
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::cuda::ops {

void add(float* x, const float* y, std::int64_t n, cudaStream_t s);  // x += y (n floats)
void scale(float* x, float s_, std::int64_t n, cudaStream_t s);      // x *= s_

}  // namespace tokenscope::cuda::ops
