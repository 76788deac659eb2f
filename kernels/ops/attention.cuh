#pragma once
// Paged attention over one layer of the device KV cache for a ragged batch. Host launcher only.
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
