#include "ops/elementwise.cuh"

#include <algorithm>

#include "ops/check.h"

namespace tokenscope::cuda::ops {

namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t n) {
    return static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536));
}

__global__ void add_kernel(float* x, const float* y, std::int64_t n) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        x[i] += y[i];
    }
}

__global__ void scale_kernel(float* x, float s, std::int64_t n) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        x[i] *= s;
    }
}

__global__ void add_rows_kernel(float* x, const float* bias, std::int64_t total, std::int64_t n) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        x[i] += bias[i % n];
    }
}

}  // namespace

void add_rows(float* x, const float* bias, std::int64_t rows, std::int64_t n, cudaStream_t s) {
    if (rows <= 0 || n <= 0) return;
    add_rows_kernel<<<grid_for(rows * n), kThreads, 0, s>>>(x, bias, rows * n, n);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("add_rows_kernel");
}

void add(float* x, const float* y, std::int64_t n, cudaStream_t s) {
    if (n <= 0) return;
    add_kernel<<<grid_for(n), kThreads, 0, s>>>(x, y, n);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("add_kernel");
}

void scale(float* x, float s_, std::int64_t n, cudaStream_t s) {
    if (n <= 0) return;
    scale_kernel<<<grid_for(n), kThreads, 0, s>>>(x, s_, n);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("scale_kernel");
}

}  // namespace tokenscope::cuda::ops
