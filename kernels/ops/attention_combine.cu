// The combine kernel of the GQA split-K attention (attention_gqa.cuh): one block per (head,
// token) merges the shares' partials (acc relative to the share's max m, sum l) with the usual
// identity M = max m_s, out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
// Unlike attention_split's merge (one exp per share per output element), each share's weight
// e^(m_s - M) is computed once, by the thread of that share, and kept in shared memory.
// An empty share (m = -inf) has weight 0 and its accumulator, which the share kernel did not
// write, is never read (compute-sanitizer initcheck would report it, and it is garbage).
#include <string>

#include "ops/attention_gqa.cuh"
#include "ops/attention_gqa_plan.h"
#include "ops/check.h"
#include "ops/reduce.cuh"

namespace tokenscope::cuda::ops {

namespace {

constexpr int kThreads = gqa::kThreads;
static_assert(gqa::kMaxSplits <= kThreads, "one thread per share");

__global__ void __launch_bounds__(kThreads)
    attention_combine_kernel(const std::int32_t* __restrict__ token_pos, int heads, int head_dim, int splits,
                             const float* __restrict__ scratch, float* __restrict__ out) {
    __shared__ float w_s[gqa::kMaxSplits];
    const int h = static_cast<int>(blockIdx.x);
    const std::int64_t t = blockIdx.y;
    const std::int64_t th = t * heads + h;
    const int tid = static_cast<int>(threadIdx.x);
    float* out_row = out + th * head_dim;
    if (token_pos[t] < 0) {  // uniform across the block: no thread reaches the reductions
        for (int d = tid; d < head_dim; d += kThreads) out_row[d] = 0.0f;
        return;
    }
    const float* parts = scratch + th * splits * (head_dim + 2);
    const float m = tid < splits ? parts[tid * (head_dim + 2) + head_dim] : -INFINITY;
    const float m_all = detail::block_max(m);  // finite: share 0 always holds the first key
    const float w = m == -INFINITY ? 0.0f : expf(m - m_all);
    const float l = m == -INFINITY ? 0.0f : w * parts[tid * (head_dim + 2) + head_dim + 1];
    const float l_all = detail::block_sum(l);
    if (tid < splits) w_s[tid] = w;
    __syncthreads();
    const float inv_l = 1.0f / l_all;
    for (int d = tid; d < head_dim; d += kThreads) {
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float ws = w_s[s];
            if (ws != 0.0f) sum += ws * parts[s * (head_dim + 2) + d];
        }
        out_row[d] = sum * inv_l;
    }
}

}  // namespace

void attention_combine(const std::int32_t* token_pos, int tokens, int heads, int head_dim, int splits,
                       const float* scratch, float* out, cudaStream_t s) {
    if (splits < 1 || splits > gqa::kMaxSplits) {
        throw InvalidArgument("cuda attention combine: splits " + std::to_string(splits) + " is not in 1.." +
                              std::to_string(gqa::kMaxSplits));
    }
    if (tokens <= 0) return;
    if (tokens > 65535) throw InvalidArgument("cuda attention combine: more than 65535 queries in one launch");
    const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(tokens));
    attention_combine_kernel<<<grid, kThreads, 0, s>>>(token_pos, heads, head_dim, splits, scratch, out);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("attention_combine_kernel");
}

}  // namespace tokenscope::cuda::ops
