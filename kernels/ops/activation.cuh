#pragma once
// Gated activations on the GPU. Host launchers only.
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::cuda::ops {

// In place over n floats: gate = silu(gate) * up = gate / (1 + exp(-gate)) * up.
void silu_mul(float* gate, const float* up, std::int64_t n, cudaStream_t s);
// In place: gate = 0.5 * g * (1 + tanh(sqrt(2/pi) * (g + 0.044715 g^3))) * up.
void gelu_tanh_mul(float* gate, const float* up, std::int64_t n, cudaStream_t s);

}  // namespace tokenscope::cuda::ops
