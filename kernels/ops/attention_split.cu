// Split-K attention (see attention.cuh): a partial-softmax kernel over shares of the keys and
// a merge kernel. The merge uses the usual identity for softmax pieces: with partial maxima
// m_s, sums l_s and accumulators a_s (each relative to its own m_s), M = max m_s and
// out = sum_s a_s e^(m_s - M) / sum_s l_s e^(m_s - M).
#include <algorithm>
#include <string>

#include "ops/attention.cuh"
#include "ops/attention_core.cuh"
#include "ops/check.h"

namespace tokenscope::cuda::ops {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// Block (s, h, t) = (blockIdx.x, blockIdx.y, blockIdx.z). Shared memory as attention_kernel:
// q[head_dim], acc[kWarps][head_dim], m[kWarps], l[kWarps].
__global__ void attention_share_kernel(const float* q, int heads, int kv_heads, int head_dim,
                                       const std::int32_t* token_pos, const std::int32_t* token_slot_begin,
                                       const std::int64_t* slot_table, const void* k_cache, const void* v_cache,
                                       const float* k_scales, const float* v_scales, int type, float score_scale,
                                       int window, int splits, float* scratch) {
    extern __shared__ float smem[];
    float* q_s = smem;
    float* acc = q_s + head_dim;
    float* m_s = acc + kWarps * head_dim;
    float* l_s = m_s + kWarps;
    const int s = static_cast<int>(blockIdx.x);
    const int h = static_cast<int>(blockIdx.y);
    const std::int64_t t = blockIdx.z;
    const std::int64_t th = t * heads + h;
    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
    float* partial = scratch + (th * splits + s) * (head_dim + 2);

    const float* q_row = q + th * head_dim;
    for (int d = tid; d < head_dim; d += kThreads) q_s[d] = q_row[d];
    float* acc_w = acc + warp * head_dim;
    for (int d = lane; d < head_dim; d += 32) acc_w[d] = 0.0f;
    __syncthreads();

    const int p = token_pos[t];
    float m = -INFINITY, l = 0.0f;
    if (p >= 0) {
        const int first = window > 0 ? max(0, p - window + 1) : 0;
        const int share = (p - first + 1 + splits - 1) / splits;
        const int begin = first + s * share;
        const int end = min(p, begin + share - 1);
        const detail::KvView kv{slot_table + token_slot_begin[t], kv_heads, h / (heads / kv_heads), head_dim,
                                k_cache, v_cache, k_scales, v_scales, type};
        detail::warp_attend(q_s, acc_w, kv, begin, end, warp, kWarps, lane, score_scale, nullptr, m, l);
    }
    if (lane == 0) {
        m_s[warp] = m;
        l_s[warp] = l;
    }
    __syncthreads();
    float factor[kWarps];
    float l_all = 0.0f;
    const float m_all = detail::merge_warps<kWarps>(m_s, l_s, factor, l_all);
    for (int d = tid; d < head_dim; d += kThreads) {
        float sum = 0.0f;
        for (int w = 0; w < kWarps; ++w) sum += acc[w * head_dim + d] * factor[w];
        partial[d] = sum;
    }
    if (tid == 0) {
        partial[head_dim] = m_all;
        partial[head_dim + 1] = l_all;
    }
}

// One block per (token, head).
__global__ void attention_merge_kernel(const std::int32_t* token_pos, int heads, int head_dim, int splits,
                                       const float* scratch, float* out) {
    const std::int64_t th = blockIdx.x;
    const std::int64_t t = th / heads;
    float* out_row = out + th * head_dim;
    const float* parts = scratch + th * splits * (head_dim + 2);
    if (token_pos[t] < 0) {
        for (int d = static_cast<int>(threadIdx.x); d < head_dim; d += blockDim.x) out_row[d] = 0.0f;
        return;
    }
    float m_all = -INFINITY;
    for (int s = 0; s < splits; ++s) m_all = fmaxf(m_all, parts[s * (head_dim + 2) + head_dim]);
    float l_all = 0.0f;
    for (int s = 0; s < splits; ++s) {
        const float m = parts[s * (head_dim + 2) + head_dim];
        if (m != -INFINITY) l_all += parts[s * (head_dim + 2) + head_dim + 1] * expf(m - m_all);
    }
    const float inv_l = 1.0f / l_all;
    for (int d = static_cast<int>(threadIdx.x); d < head_dim; d += blockDim.x) {
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float m = parts[s * (head_dim + 2) + head_dim];
            if (m != -INFINITY) sum += parts[s * (head_dim + 2) + d] * expf(m - m_all);
        }
        out_row[d] = sum * inv_l;
    }
}

}  // namespace

std::size_t attention_split_scratch_floats(int tokens, int heads, int head_dim, int splits) {
    return static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads) * static_cast<std::size_t>(splits) *
           static_cast<std::size_t>(head_dim + 2);
}

int attention_splits_for(std::int64_t capacity_tokens) {
    return static_cast<int>(std::clamp<std::int64_t>((capacity_tokens + 255) / 256, 1, 32));
}

void attention_split(const float* q, int tokens, int heads, int kv_heads, int head_dim,
                     const std::int32_t* token_pos, const std::int32_t* token_slot_begin,
                     const std::int64_t* slot_table, const void* k_cache, const void* v_cache,
                     const float* k_scales, const float* v_scales, kv::ElementType type,
                     float score_scale, int window, int splits, float* scratch, float* out, cudaStream_t s) {
    const int t = static_cast<int>(type);
    if (t != kvt::kF32 && t != kvt::kF16 && t != kvt::kQ8) {
        throw InvalidArgument("cuda split attention: unknown cache element type " + std::to_string(t));
    }
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || head_dim <= 0) {
        throw InvalidArgument("cuda split attention: heads " + std::to_string(heads) + ", kv_heads " +
                              std::to_string(kv_heads) + ", head_dim " + std::to_string(head_dim));
    }
    if (splits < 1 || splits > kMaxAttentionSplits) {
        throw InvalidArgument("cuda split attention: splits " + std::to_string(splits) + " is not in 1.." +
                              std::to_string(kMaxAttentionSplits));
    }
    if (t == kvt::kQ8 && (k_scales == nullptr || v_scales == nullptr)) {
        throw InvalidArgument("cuda split attention: a q8 cache needs k_scales and v_scales");
    }
    if (tokens <= 0) return;
    if (tokens > 65535) throw InvalidArgument("cuda split attention: more than 65535 queries in one launch");
    const std::size_t shared = sizeof(float) * (static_cast<std::size_t>(head_dim) * (1 + kWarps) + 2 * kWarps);
    if (shared > 48 * 1024) {
        throw InvalidArgument("cuda split attention: head_dim " + std::to_string(head_dim) + " needs more than 48 KiB of shared memory");
    }
    const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(heads), static_cast<unsigned>(tokens));
    attention_share_kernel<<<grid, kThreads, shared, s>>>(q, heads, kv_heads, head_dim, token_pos, token_slot_begin,
                                                          slot_table, k_cache, v_cache, k_scales, v_scales, t,
                                                          score_scale, window, splits, scratch);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("attention_share_kernel");
    attention_merge_kernel<<<static_cast<unsigned>(tokens * heads), kThreads, 0, s>>>(token_pos, heads, head_dim,
                                                                                     splits, scratch, out);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("attention_merge_kernel");
}

}  // namespace tokenscope::cuda::ops
