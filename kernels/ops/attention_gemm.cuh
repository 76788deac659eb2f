#pragma once
// Prefill attention on tensor cores: for ONE sequence's chunk of queries (consecutive positions,
// as a prefill chunk is), the scores and the weighted sum of values are two cuBLAS bf16 GEMMs
// batched over the KV heads, with a masked softmax kernel between them. The per-(token, head)
// kernel of attention.cu runs the same arithmetic on CUDA cores one key at a time, which at
// 2048 tokens costs several times the whole model's matrix products.
//
// Steps, per block of up to `query_block` queries:
//   1. (once) the sequence's K and V rows 0..context-1 are gathered from the paged cache into
//      dense [position][kv_head][head_dim] bf16 arrays (Q8 rows times their scales);
//   2. the block's queries become head-major bf16 [head][query][head_dim];
//   3. S[head][query][key] = score_scale * q . k   (cublasGemmStridedBatchedEx, f32 out);
//   4. P = softmax over each row's visible keys [first, p] (0 elsewhere), rounded to bf16;
//   5. O[head][query][d] = P . V (f32 out), scattered back to out[query][head * head_dim + d].
// Precision: bf16 Q, K, V and P with f32 accumulation (about 1e-2 relative, the self-test's
// tolerance is 3e-2). Host launcher only.
#include <cstddef>
#include <cstdint>

#include "ops/stream.h"

struct cublasContext;
using cublasHandle_t = cublasContext*;

namespace tokenscope::kv {
enum class ElementType;
}

namespace tokenscope::cuda::ops {

// Scratch bytes for a chunk of `tokens` queries over `context` keys.
std::size_t attention_gemm_scratch_bytes(int tokens, int context, int heads, int kv_heads, int head_dim,
                                         int query_block);

// q: [tokens][heads * head_dim] f32 for positions token_pos[0..tokens) of one sequence (device
// array; they must be the consecutive positions context - tokens .. context - 1); the
// sequence's slot of position j is slot_table[j] (device). out: [tokens][heads * head_dim].
// window > 0: a query at p sees keys [max(0, p - window + 1), p]. Cache arguments as
// attention(). `scratch` holds attention_gemm_scratch_bytes(...) bytes (256-byte aligned).
void attention_gemm(const float* q, int tokens, int context, int heads, int kv_heads, int head_dim,
                    const std::int32_t* token_pos, const std::int64_t* slot_table, const void* k_cache,
                    const void* v_cache, const float* k_scales, const float* v_scales, kv::ElementType type,
                    float score_scale, int window, int query_block, void* scratch, float* out,
                    cublasHandle_t cublas, cudaStream_t s);

}  // namespace tokenscope::cuda::ops
