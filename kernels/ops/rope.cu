#include "ops/rope.cuh"

#include <string>

#include "ops/check.h"

namespace tokenscope::cuda::ops {

namespace {

// One thread per (token, head, pair).
__global__ void rope_kernel(float* x, std::int64_t total_pairs, int heads, int head_dim,
                            int half, const std::int32_t* positions, double freq_base,
                            double linear_scale, bool neox, const float* freq_factors) {
    const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= total_pairs) return;
    const int i = static_cast<int>(idx % half);
    const std::int64_t head_index = idx / half;  // token * heads + head
    const std::int64_t token = head_index / heads;
    float* head = x + head_index * head_dim;
    const int rope_dims = 2 * half;
    double freq = pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
    if (freq_factors) freq /= static_cast<double>(freq_factors[i]);
    const float inv_freq = static_cast<float>(freq);
    const double position = static_cast<double>(positions[token]) / linear_scale;
    const double angle = position * static_cast<double>(inv_freq);
    const float c = static_cast<float>(cos(angle));
    const float sn = static_cast<float>(sin(angle));
    const int ia = neox ? i : 2 * i;
    const int ib = neox ? i + half : 2 * i + 1;
    const float x0 = head[ia];
    const float x1 = head[ib];
    head[ia] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
    head[ib] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
}

}  // namespace

void rope(float* x, int tokens, int heads, int head_dim, int rope_dims,
          const std::int32_t* positions, float freq_base, float linear_scale, bool neox,
          const float* freq_factors, cudaStream_t s) {
    if (rope_dims < 0 || rope_dims > head_dim || rope_dims % 2 != 0 || heads <= 0) {
        throw InvalidArgument("cuda rope: rope_dims " + std::to_string(rope_dims) +
                              " must be even and within head_dim " + std::to_string(head_dim));
    }
    const int half = rope_dims / 2;
    if (tokens <= 0 || half == 0) return;
    const std::int64_t total = static_cast<std::int64_t>(tokens) * heads * half;
    constexpr int kThreads = 256;
    const std::int64_t blocks = (total + kThreads - 1) / kThreads;
    rope_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
        x, total, heads, head_dim, half, positions, static_cast<double>(freq_base),
        static_cast<double>(linear_scale), neox, freq_factors);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace tokenscope::cuda::ops
