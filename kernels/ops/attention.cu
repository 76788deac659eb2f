#include "ops/attention.cuh"

#include <string>

#include <cuda_fp16.h>

#include "ops/check.h"
#include "ops/attention_core.cuh"

namespace tokenscope::cuda::ops {

namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kWarps = kThreads / 32;

// One block per (token, head): blockIdx.x = t * heads + h. Warp w takes keys first + w,
// first + w + kWarps, ...; each warp keeps its own running max m, sum l and accumulator
// acc[head_dim] (in shared memory, lane-owned elements d = lane + 32i), merged at the end.
// Shared memory: q[head_dim], acc[kWarps][head_dim], m[kWarps], l[kWarps].
__global__ void attention_kernel(const float* q, int heads, int kv_heads, int head_dim,
                                 const std::int32_t* token_pos,
                                 const std::int32_t* token_slot_begin,
                                 const std::int64_t* slot_table, const void* k_cache,
                                 const void* v_cache, const float* k_scales,
                                 const float* v_scales, int type, float score_scale, int window,
                                 float* out, float* capture, std::int64_t capture_stride) {
    extern __shared__ float smem[];
    float* q_s = smem;
    float* acc = q_s + head_dim;
    float* m_s = acc + kWarps * head_dim;
    float* l_s = m_s + kWarps;

    const std::int64_t th = blockIdx.x;
    const std::int64_t t = th / heads;
    const int h = static_cast<int>(th % heads);
    const int kvh = h / (heads / kv_heads);
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid % 32;
    const int warp = tid / 32;

    const float* q_row = q + th * head_dim;  // [t][h][d] = (t * heads + h) * head_dim
    float* out_row = out + th * head_dim;
    for (int d = tid; d < head_dim; d += kThreads) q_s[d] = q_row[d];
    float* acc_w = acc + warp * head_dim;
    for (int d = lane; d < head_dim; d += 32) acc_w[d] = 0.0f;
    __syncthreads();

    const int p = token_pos[t];
    if (p < 0) {  // not a valid position: nothing to attend to
        for (int d = tid; d < head_dim; d += kThreads) out_row[d] = 0.0f;
        return;
    }
    const int first = window > 0 ? max(0, p - window + 1) : 0;
    const std::int64_t* slots = slot_table + token_slot_begin[t];
    float* cap = capture != nullptr ? capture + th * capture_stride : nullptr;

    float m = -INFINITY;
    float l = 0.0f;
    const detail::KvView kv{slots, kv_heads, kvh, head_dim, k_cache, v_cache, k_scales, v_scales, type};
    detail::warp_attend(q_s, acc_w, kv, first, p, warp, kWarps, lane, score_scale, cap, m, l);
    if (lane == 0) {
        m_s[warp] = m;
        l_s[warp] = l;
    }
    __syncthreads();

    // Merge the warps: every thread computes the same M and L.
    float factor[kWarps];
    float l_all = 0.0f;
    const float m_all = detail::merge_warps<kWarps>(m_s, l_s, factor, l_all);
    const float inv_l = 1.0f / l_all;
    for (int d = tid; d < head_dim; d += kThreads) {
        float sum = 0.0f;
        for (int w = 0; w < kWarps; ++w) sum += acc[w * head_dim + d] * factor[w];
        out_row[d] = sum * inv_l;
    }
    if (cap != nullptr) {
        // The raw scores were written by lane 0 of each warp before the __syncthreads above.
        for (int j = first + tid; j <= p; j += kThreads) cap[j] = expf(cap[j] - m_all) * inv_l;
    }
}

}  // namespace

void attention(const float* q, int tokens, int heads, int kv_heads, int head_dim,
               const std::int32_t* token_pos, const std::int32_t* token_slot_begin,
               const std::int64_t* slot_table, const void* k_cache, const void* v_cache,
               const float* k_scales, const float* v_scales, kv::ElementType type,
               float score_scale, int window, float* out, float* capture,
               std::int64_t capture_stride, cudaStream_t s) {
    const int t = static_cast<int>(type);
    if (t != kvt::kF32 && t != kvt::kF16 && t != kvt::kQ8) {
        throw InvalidArgument("cuda attention: unknown cache element type " + std::to_string(t));
    }
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || head_dim <= 0) {
        throw InvalidArgument("cuda attention: heads " + std::to_string(heads) + ", kv_heads " +
                              std::to_string(kv_heads) + ", head_dim " + std::to_string(head_dim) +
                              " (heads must be a positive multiple of kv_heads)");
    }
    if (t == kvt::kQ8 && (k_scales == nullptr || v_scales == nullptr)) {
        throw InvalidArgument("cuda attention: a q8 cache needs k_scales and v_scales");
    }
    if (capture != nullptr && capture_stride <= 0) {
        throw InvalidArgument("cuda attention: capture_stride must be positive");
    }
    if (tokens <= 0) return;
    const std::size_t shared =
        sizeof(float) * (static_cast<std::size_t>(head_dim) * (1 + kWarps) + 2 * kWarps);
    if (shared > 48 * 1024) {
        throw InvalidArgument("cuda attention: head_dim " + std::to_string(head_dim) +
                              " needs more than 48 KiB of shared memory");
    }
    const auto blocks = static_cast<unsigned>(static_cast<std::int64_t>(tokens) * heads);
    attention_kernel<<<blocks, kThreads, shared, s>>>(
        q, heads, kv_heads, head_dim, token_pos, token_slot_begin, slot_table, k_cache, v_cache,
        k_scales, v_scales, t, score_scale, window, out, capture, capture_stride);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("attention_kernel");
}

}  // namespace tokenscope::cuda::ops
