#include "ops/kv_append.cuh"

#include <string>

#include <cuda_fp16.h>

#include "ops/check.h"
#include "ops/kv_cache_types.cuh"
#include "ops/reduce.cuh"

namespace tokenscope::cuda::ops {

namespace {

// grid (tokens * kv_heads, 2): one block per (token, head) row; blockIdx.y 0 = K, 1 = V.
__global__ void kv_append_kernel(const float* k, const float* v, const std::int64_t* slots,
                                 void* k_cache, void* v_cache, float* k_scales, float* v_scales,
                                 int kv_heads, int head_dim, int type) {
    const int token = static_cast<int>(blockIdx.x) / kv_heads;
    const int head = static_cast<int>(blockIdx.x) % kv_heads;
    const std::int64_t slot = slots[token];
    if (slot < 0) return;  // uniform across the block, before any __syncthreads
    const bool is_v = blockIdx.y == 1;
    const std::int64_t row_width = static_cast<std::int64_t>(kv_heads) * head_dim;
    const float* x = (is_v ? v : k) + token * row_width + static_cast<std::int64_t>(head) * head_dim;
    const std::int64_t row = slot * kv_heads + head;
    const std::int64_t first = row * head_dim;
    void* cache = is_v ? v_cache : k_cache;
    if (type == kvt::kF32) {
        float* out = static_cast<float*>(cache) + first;
        for (int i = threadIdx.x; i < head_dim; i += blockDim.x) out[i] = x[i];
    } else if (type == kvt::kF16) {
        __half* out = static_cast<__half*>(cache) + first;
        for (int i = threadIdx.x; i < head_dim; i += blockDim.x) out[i] = __float2half_rn(x[i]);
    } else {
        float amax = 0.0f;
        for (int i = threadIdx.x; i < head_dim; i += blockDim.x) amax = fmaxf(amax, fabsf(x[i]));
        amax = detail::block_max(amax);
        const float scale = __fdiv_rn(amax, 127.0f);
        std::int8_t* out = static_cast<std::int8_t*>(cache) + first;
        for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
            if (scale == 0.0f) {
                out[i] = 0;
            } else {
                const float r = roundf(__fdiv_rn(x[i], scale));
                out[i] = static_cast<std::int8_t>(fminf(fmaxf(r, -127.0f), 127.0f));
            }
        }
        if (threadIdx.x == 0) (is_v ? v_scales : k_scales)[row] = scale;
    }
}

}  // namespace

void kv_append(const float* k, const float* v, int tokens, const std::int64_t* slots, void* k_cache,
               void* v_cache, float* k_scales, float* v_scales, int kv_heads, int head_dim,
               kv::ElementType type, cudaStream_t s) {
    const int t = static_cast<int>(type);
    if (t != kvt::kF32 && t != kvt::kF16 && t != kvt::kQ8) {
        throw InvalidArgument("cuda kv_append: unknown cache element type " + std::to_string(t));
    }
    if (kv_heads <= 0 || head_dim <= 0) {
        throw InvalidArgument("cuda kv_append: kv_heads " + std::to_string(kv_heads) +
                              " and head_dim " + std::to_string(head_dim) + " must be positive");
    }
    if (t == kvt::kQ8 && (k_scales == nullptr || v_scales == nullptr)) {
        throw InvalidArgument("cuda kv_append: a q8 cache needs k_scales and v_scales");
    }
    if (tokens <= 0) return;
    constexpr int kThreads = 128;
    const dim3 grid(static_cast<unsigned>(static_cast<std::int64_t>(tokens) * kv_heads), 2);
    kv_append_kernel<<<grid, kThreads, 0, s>>>(k, v, slots, k_cache, v_cache, k_scales, v_scales,
                                               kv_heads, head_dim, t);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("kv_append_kernel");
}

}  // namespace tokenscope::cuda::ops
