// GQA split-K decode attention (see attention_gqa.cuh): the share kernel. The combine kernel is
// in attention_combine.cu, the index math in attention_gqa_plan.h.
//
// Block (s, kvh, t) = (blockIdx.x, blockIdx.y, blockIdx.z) takes keys share_range(p, window,
// splits, s) of token t's sequence for the `group` = heads / kv_heads query heads h0 .. h0 +
// group - 1 of KV head kvh (h0 = kvh * group; the group's heads are contiguous in q, as in the
// CPU backend's mapping h -> h / group). Keys go through shared memory one tile of kTile = 32
// at a time:
//   1. the K tile [32][head_dim] is loaded once (8-element vector loads, Q8 rows times their
//      scale, rows past the share's end zero) for all the group's heads;
//   2. warp w computes the scores of heads w, w + 4, ...: lane j the key j of the tile (the
//      tile's rows are padded to head_dim + 1 floats, so lane j's row sits in its own bank),
//      then that head's online-softmax update (tile max and sum by warp shuffles);
//   3. the V tile replaces the K tile, and thread i accumulates (head, dim) pairs
//      i, i + 128, ...: acc = acc * corr + sum_j p_j v_j[d].
// Why this shape: the old kernels (attention.cu, attention_split.cu) give each query head its
// own block, so each K/V row is read `group` times (4x for the 1B model's 32 over 8 heads) and
// every key costs a warp reduction per head; here a row is read once and the reductions are
// per tile. The partial (acc, m, l) of every (token, head, share) goes to scratch in
// attention_split's layout.
#include "ops/attention_gqa.cuh"

#include <string>

#include <cuda_fp16.h>

#include "ops/attention_gqa_plan.h"
#include "ops/check.h"
#include "ops/kv_cache_types.cuh"
#include "ops/reduce.cuh"

namespace tokenscope::cuda::ops {

namespace {

using gqa::kThreads;
using gqa::kTile;
constexpr int kWarps = kThreads / 32;
static_assert(kTile == 32, "the score step gives one warp lane to each key of a tile");

// Elements e0 .. e0 + 7 of a cache array (e0 a multiple of 8, the array aligned as
// attention_gqa_supports checks) as floats, without the Q8 row scale.
template <int Type>
__device__ __forceinline__ void load8(const void* cache, std::int64_t e0, float (&v)[8]) {
    if constexpr (Type == kvt::kF32) {
        const auto* p = reinterpret_cast<const float4*>(static_cast<const float*>(cache) + e0);
        const float4 a = __ldg(p), b = __ldg(p + 1);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else if constexpr (Type == kvt::kF16) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(static_cast<const __half*>(cache) + e0));
        const auto* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 f = __half22float2(h[i]);
            v[2 * i] = f.x;
            v[2 * i + 1] = f.y;
        }
    } else {
        const uint2 raw = __ldg(reinterpret_cast<const uint2*>(static_cast<const std::int8_t*>(cache) + e0));
        const auto* b = reinterpret_cast<const std::int8_t*>(&raw);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(b[i]);
    }
}

// Keys tile_begin .. tile_begin + kTile - 1 of KV head kvh into tile[j][head_dim + 1] as floats
// (Q8: times the row's scale). Rows past `end` are written as zeros, never loaded: a partial
// tile reads no cache row (nor scale) beyond the share, so nothing unwritten is read.
template <int Type>
__device__ __forceinline__ void load_tile(float* tile, const void* cache, const float* scales, const std::int64_t* slots,
                                          int kv_heads, int kvh, int head_dim, int tile_begin, int end) {
    const int vectors = head_dim / 8;
    for (int i = static_cast<int>(threadIdx.x); i < kTile * vectors; i += kThreads) {
        const int j = i / vectors;
        const int c = (i % vectors) * 8;
        const int key = tile_begin + j;
        float v[8];
        if (key <= end) {
            const std::int64_t row = slots[key] * kv_heads + kvh;
            load8<Type>(cache, row * head_dim + c, v);
            if constexpr (Type == kvt::kQ8) {
                const float scale = scales[row];
#pragma unroll
                for (int k = 0; k < 8; ++k) v[k] *= scale;
            }
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k) v[k] = 0.0f;
        }
        float* dst = tile + j * (head_dim + 1) + c;
#pragma unroll
        for (int k = 0; k < 8; ++k) dst[k] = v[k];
    }
}

template <int Type>
__global__ void __launch_bounds__(kThreads)
    attention_gqa_kernel(const float* __restrict__ q, int heads, int kv_heads, int head_dim,
                         const std::int32_t* __restrict__ token_pos, const std::int32_t* __restrict__ token_slot_begin,
                         const std::int64_t* __restrict__ slot_table, const void* __restrict__ k_cache,
                         const void* __restrict__ v_cache, const float* __restrict__ k_scales,
                         const float* __restrict__ v_scales, float score_scale, int window, int splits,
                         float* __restrict__ scratch) {
    extern __shared__ float smem[];
    const int group = heads / kv_heads;
    const int D = head_dim;
    float* q_s = smem;                    // [group][D]
    float* acc_s = q_s + group * D;       // [group][D]
    float* tile = acc_s + group * D;      // [kTile][D + 1]
    float* p_s = tile + kTile * (D + 1);  // [group][kTile]
    float* m_s = p_s + group * kTile;     // [group]
    float* l_s = m_s + group;             // [group]
    float* corr_s = l_s + group;          // [group]

    const int s = static_cast<int>(blockIdx.x);
    const int kvh = static_cast<int>(blockIdx.y);
    const std::int64_t t = blockIdx.z;
    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int h0 = kvh * group;
    const std::int64_t head_stride = static_cast<std::int64_t>(splits) * (D + 2);  // between heads' partials
    float* part = scratch + ((t * heads + h0) * splits + s) * (D + 2);

    const int p = token_pos[t];
    const gqa::KeyRange r = p >= 0 ? gqa::share_range(p, window, splits, s) : gqa::KeyRange{0, -1};
    if (r.begin > r.end) {
        // An empty share (past a short context's end, or an invalid position): max -inf and sum 0
        // only. The combine gives such a share weight 0 and never reads its accumulator.
        for (int g = tid; g < group; g += kThreads) {
            part[g * head_stride + D] = -INFINITY;
            part[g * head_stride + D + 1] = 0.0f;
        }
        return;
    }
    const float* q_row = q + (t * heads + h0) * D;
    for (int i = tid; i < group * D; i += kThreads) {
        q_s[i] = q_row[i];
        acc_s[i] = 0.0f;
    }
    for (int g = tid; g < group; g += kThreads) {
        m_s[g] = -INFINITY;
        l_s[g] = 0.0f;
    }
    const std::int64_t* slots = slot_table + token_slot_begin[t];
    __syncthreads();

    for (int tb = r.begin; tb <= r.end; tb += kTile) {
        load_tile<Type>(tile, k_cache, k_scales, slots, kv_heads, kvh, D, tb, r.end);
        __syncthreads();
        const bool valid = tb + lane <= r.end;
        const float* k_row = tile + lane * (D + 1);
        for (int g = warp; g < group; g += kWarps) {  // warp-uniform: the shuffles see all lanes
            const float* qg = q_s + g * D;
            float dot = 0.0f;
#pragma unroll 8
            for (int d = 0; d < D; ++d) dot += qg[d] * k_row[d];
            const float score = valid ? dot * score_scale : -INFINITY;
            const float m_old = m_s[g], l_old = l_s[g];
            const float m_new = fmaxf(m_old, detail::warp_max(score));  // finite: key tb is valid
            const float corr = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
            const float pj = valid ? expf(score - m_new) : 0.0f;
            const float l_new = l_old * corr + detail::warp_sum(pj);
            p_s[g * kTile + lane] = pj;
            __syncwarp();  // every lane has read m_s[g], l_s[g] before lane 0 replaces them
            if (lane == 0) {
                m_s[g] = m_new;
                l_s[g] = l_new;
                corr_s[g] = corr;
            }
        }
        __syncthreads();  // the scores are done with the K tile; p, corr are visible
        load_tile<Type>(tile, v_cache, v_scales, slots, kv_heads, kvh, D, tb, r.end);
        __syncthreads();
        const int n = min(kTile, r.end - tb + 1);
        for (int i = tid; i < group * D; i += kThreads) {
            const int g = i / D, d = i % D;
            const float* pg = p_s + g * kTile;
            float sum = 0.0f;
            for (int j = 0; j < n; ++j) sum += pg[j] * tile[j * (D + 1) + d];
            acc_s[i] = acc_s[i] * corr_s[g] + sum;
        }
        __syncthreads();  // before the next tile replaces tile, p and corr
    }
    // Each thread stores the acc_s entries it updated itself; m_s, l_s were last written before
    // the loop's final __syncthreads.
    for (int i = tid; i < group * D; i += kThreads) {
        const int g = i / D, d = i % D;
        part[g * head_stride + d] = acc_s[i];
    }
    for (int g = tid; g < group; g += kThreads) {
        part[g * head_stride + D] = m_s[g];
        part[g * head_stride + D + 1] = l_s[g];
    }
}

std::uintptr_t alignment_for(int type) { return type == kvt::kQ8 ? 8 : 16; }

}  // namespace

int device_sm_count() {
    int device = 0;
    TOKENSCOPE_CUDA_CHECK(cudaGetDevice(&device));
    int sms = 0;
    TOKENSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
}

bool attention_gqa_supports(kv::ElementType type, int heads, int kv_heads, int head_dim, const void* k_cache,
                            const void* v_cache) {
    const int t = static_cast<int>(type);
    if (t != kvt::kF32 && t != kvt::kF16 && t != kvt::kQ8) return false;
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || head_dim <= 0 || head_dim % 8 != 0) return false;
    if (gqa::shared_floats(heads / kv_heads, head_dim) * sizeof(float) > 48 * 1024) return false;
    const std::uintptr_t a = alignment_for(t);
    return reinterpret_cast<std::uintptr_t>(k_cache) % a == 0 && reinterpret_cast<std::uintptr_t>(v_cache) % a == 0;
}

void attention_gqa(const float* q, int tokens, int heads, int kv_heads, int head_dim, const std::int32_t* token_pos,
                   const std::int32_t* token_slot_begin, const std::int64_t* slot_table, const void* k_cache,
                   const void* v_cache, const float* k_scales, const float* v_scales, kv::ElementType type,
                   float score_scale, int window, int splits, float* scratch, float* out, cudaStream_t s) {
    const int t = static_cast<int>(type);
    if (!attention_gqa_supports(type, heads, kv_heads, head_dim, k_cache, v_cache)) {
        throw InvalidArgument("cuda GQA attention: type " + std::to_string(t) + ", heads " + std::to_string(heads) +
                              ", kv_heads " + std::to_string(kv_heads) + ", head_dim " + std::to_string(head_dim) +
                              " (or the cache alignment) is not supported; use attention_split");
    }
    if (splits < 1 || splits > gqa::kMaxSplits) {
        throw InvalidArgument("cuda GQA attention: splits " + std::to_string(splits) + " is not in 1.." +
                              std::to_string(gqa::kMaxSplits));
    }
    if (t == kvt::kQ8 && (k_scales == nullptr || v_scales == nullptr)) {
        throw InvalidArgument("cuda GQA attention: a q8 cache needs k_scales and v_scales");
    }
    if (tokens <= 0) return;
    if (tokens > 65535 || kv_heads > 65535) {
        throw InvalidArgument("cuda GQA attention: more than 65535 queries or KV heads in one launch");
    }
    const std::size_t shared = gqa::shared_floats(heads / kv_heads, head_dim) * sizeof(float);
    const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(kv_heads), static_cast<unsigned>(tokens));
#define TOKENSCOPE_GQA_LAUNCH(T)                                                                                  \
    attention_gqa_kernel<T><<<grid, kThreads, shared, s>>>(q, heads, kv_heads, head_dim, token_pos, token_slot_begin, \
                                                           slot_table, k_cache, v_cache, k_scales, v_scales,        \
                                                           score_scale, window, splits, scratch)
    switch (t) {
        case kvt::kF32: TOKENSCOPE_GQA_LAUNCH(kvt::kF32); break;
        case kvt::kF16: TOKENSCOPE_GQA_LAUNCH(kvt::kF16); break;
        default: TOKENSCOPE_GQA_LAUNCH(kvt::kQ8); break;
    }
#undef TOKENSCOPE_GQA_LAUNCH
    TOKENSCOPE_CUDA_CHECK_LAUNCH("attention_gqa_kernel");
    attention_combine(token_pos, tokens, heads, head_dim, splits, scratch, out, s);
}

}  // namespace tokenscope::cuda::ops
