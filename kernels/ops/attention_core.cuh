#pragma once
// The inner loop shared by the attention kernels (attention.cu: one block per (token, head);
// attention_split.cu: split-K over the keys): one warp's online softmax over a strided subset
// of the keys. Device-only header.
#include <cstdint>

#include <cuda_fp16.h>

#include "ops/kv_cache_types.cuh"
#include "ops/reduce.cuh"

namespace tokenscope::cuda::ops::detail {

// Element `index` of a cache array, without the Q8 row scale.
__device__ inline float load_kv(const void* cache, int type, std::int64_t index) {
    if (type == kvt::kF32) return static_cast<const float*>(cache)[index];
    if (type == kvt::kF16) return __half2float(static_cast<const __half*>(cache)[index]);
    return static_cast<float>(static_cast<const std::int8_t*>(cache)[index]);
}

struct KvView {
    const std::int64_t* slots;  // physical slot of each position of the sequence
    int kv_heads;
    int kv_head;
    int head_dim;
    const void* k_cache;
    const void* v_cache;
    const float* k_scales;  // Q8 only
    const float* v_scales;
    int type;
};

// Keys j = begin + warp, begin + warp + warps, ... up to end (inclusive). The warp keeps its
// running max m, sum l (identical in every lane: the xor reductions are symmetric) and the
// accumulator acc_w[head_dim] (lane-owned elements d = lane + 32 i). q_s: the query in shared
// memory. cap (nullable): raw scores are written to cap[j] by lane 0.
__device__ inline void warp_attend(const float* q_s, float* acc_w, const KvView& kv, int begin, int end,
                                   int warp, int warps, int lane, float score_scale, float* cap, float& m,
                                   float& l) {
    for (int j = begin + warp; j <= end; j += warps) {
        const std::int64_t row = kv.slots[j] * kv.kv_heads + kv.kv_head;
        const std::int64_t base = row * kv.head_dim;
        float partial = 0.0f;
        for (int d = lane; d < kv.head_dim; d += 32) partial += q_s[d] * load_kv(kv.k_cache, kv.type, base + d);
        float dot = warp_sum(partial);
        if (kv.type == kvt::kQ8) dot *= kv.k_scales[row];
        const float score = dot * score_scale;
        if (cap != nullptr && lane == 0) cap[j] = score;
        const float m_new = fmaxf(m, score);
        const float correction = m == -INFINITY ? 0.0f : expf(m - m_new);
        const float w = expf(score - m_new);
        l = l * correction + w;
        const float wv = kv.type == kvt::kQ8 ? w * kv.v_scales[row] : w;
        for (int d = lane; d < kv.head_dim; d += 32)
            acc_w[d] = acc_w[d] * correction + wv * load_kv(kv.v_cache, kv.type, base + d);
        m = m_new;
    }
}

// After every warp has run warp_attend and written its running max and sum to m_s[w], l_s[w]
// (and __syncthreads): the block's common max (returned) and sum (l_all), and each warp's
// rescale factor e^(m_w - max), 0 for a warp that saw no key. Every thread computes the same.
template <int Warps>
__device__ inline float merge_warps(const float* m_s, const float* l_s, float (&factor)[Warps], float& l_all) {
    float m_all = -INFINITY;
    for (int w = 0; w < Warps; ++w) m_all = fmaxf(m_all, m_s[w]);
    l_all = 0.0f;
    for (int w = 0; w < Warps; ++w) {
        factor[w] = m_s[w] == -INFINITY ? 0.0f : expf(m_s[w] - m_all);
        l_all += l_s[w] * factor[w];
    }
    return m_all;
}

}  // namespace tokenscope::cuda::ops::detail
