#pragma once
// Rotary position embedding on the GPU. Host launcher only.
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::cuda::ops {

// In place on x = [tokens][heads * head_dim]: rotates the first rope_dims dims of every head of
// token t by position positions[t] (device array of `tokens` ints). The math of
// runtime::ops::rope with CpuBackend's frequencies: inv_freq[i] = (float)base^(-2i/rope_dims)
// (computed in double), angle = (pos / linear_scale) * inv_freq[i] in double, cos/sin in double
// rounded to float. neox: pairs (i, i + rope_dims/2), else (2i, 2i+1). freq_factors (device,
// rope_dims / 2 floats, or nullptr): Llama 3.x rope_freqs, dividing each pair's frequency
// before the rounding to float, as CpuBackend does.
void rope(float* x, int tokens, int heads, int head_dim, int rope_dims,
          const std::int32_t* positions, float freq_base, float linear_scale, bool neox,
          const float* freq_factors, cudaStream_t s);

}  // namespace tokenscope::cuda::ops
