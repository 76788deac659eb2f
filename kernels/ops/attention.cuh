#pragma once
// Paged attention over one layer of the device KV cache for a ragged batch. Host launcher only.
#include <cstddef>
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::kv {
enum class ElementType;
}

namespace tokenscope::cuda::ops {

// q: [tokens][heads * head_dim]; out: same shape. Token t is the query at position
// p = token_pos[t] of its sequence and attends to positions j in [first, p], with
// first = window > 0 ? max(0, p - window + 1) : 0. The physical cache slot of position j of
// t's sequence is slot_table[token_slot_begin[t] + j]. Head h reads kv head h / (heads / kv_heads)
// (heads must be a multiple of kv_heads). Cache layout and element types as kv_append
// (k_scales / v_scales only for Q8). score = (q . k) * score_scale, w = softmax(score),
// out[t][h * head_dim + d] = sum_j w_j v_j[d].
//
// capture (nullable): when given, the softmax weights of (t, h) are written to
// capture[(t * heads + h) * capture_stride + j] for j in [first, p]; the entries outside that
// range are not touched (zeroing them is the caller's job). The capture row is also used as the
// kernel's scratch for the raw scores, so capture_stride must be > every token_pos.
// No scratch buffer is needed: one block per (token, head) runs an online softmax (running max
// and sum) over the keys, any context length. All pointers are device pointers.
void attention(const float* q, int tokens, int heads, int kv_heads, int head_dim,
               const std::int32_t* token_pos, const std::int32_t* token_slot_begin,
               const std::int64_t* slot_table, const void* k_cache, const void* v_cache,
               const float* k_scales, const float* v_scales, kv::ElementType type,
               float score_scale, int window, float* out, float* capture,
               std::int64_t capture_stride, cudaStream_t s);

}  // namespace tokenscope::cuda::ops

namespace tokenscope::cuda::ops {

// Split-K ("flash-decoding") form of attention() for few queries over long contexts, where one
// block per (token, head) leaves most of the GPU idle (32 heads = 32 blocks on 132 SMs). Each
// (token, head) gets `splits` blocks; block s takes the s-th of `splits` equal shares of the
// keys [first, p] and writes its unnormalised partial (acc[head_dim], running max, sum) to
// `scratch`; a second kernel merges the shares. Same arguments and result as attention()
// without capture. `splits` is fixed by the caller (not derived from the context) so that the
// launch shape does not change from step to step: a CUDA graph can replay it. Shares past the
// end of a short context are empty and cost one block each.
inline constexpr int kMaxAttentionSplits = 64;
// Floats of scratch for `tokens` queries.
std::size_t attention_split_scratch_floats(int tokens, int heads, int head_dim, int splits);
// The split count for a cache of `capacity_tokens`: about 256 keys per share, 1 to 32 shares.
int attention_splits_for(std::int64_t capacity_tokens);
void attention_split(const float* q, int tokens, int heads, int kv_heads, int head_dim,
                     const std::int32_t* token_pos, const std::int32_t* token_slot_begin,
                     const std::int64_t* slot_table, const void* k_cache, const void* v_cache,
                     const float* k_scales, const float* v_scales, kv::ElementType type,
                     float score_scale, int window, int splits, float* scratch, float* out, cudaStream_t s);

}  // namespace tokenscope::cuda::ops
