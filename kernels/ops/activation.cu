#include "ops/activation.cuh"

#include <algorithm>

#include "ops/check.h"

namespace tokenscope::cuda::ops {

namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t n) {
    // Grid-stride loops below cover any n; cap the grid at a size that fills every GPU.
    return static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536));
}

__global__ void silu_mul_kernel(float* gate, const float* up, std::int64_t n) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void gelu_tanh_mul_kernel(float* gate, const float* up, std::int64_t n) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const float g = gate[i];
        const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
        gate[i] = 0.5f * g * (1.0f + tanhf(inner)) * up[i];
    }
}

}  // namespace

void silu_mul(float* gate, const float* up, std::int64_t n, cudaStream_t s) {
    if (n <= 0) return;
    silu_mul_kernel<<<grid_for(n), kThreads, 0, s>>>(gate, up, n);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("silu_mul_kernel");
}

void gelu_tanh_mul(float* gate, const float* up, std::int64_t n, cudaStream_t s) {
    if (n <= 0) return;
    gelu_tanh_mul_kernel<<<grid_for(n), kThreads, 0, s>>>(gate, up, n);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("gelu_tanh_mul_kernel");
}

}  // namespace tokenscope::cuda::ops
