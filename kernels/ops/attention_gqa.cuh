#pragma once
// GQA split-K decode attention: one block per (share of the keys, KV head, token) computes all
// heads / kv_heads query heads of that KV head's group, so each K and V row is read from memory
// once per group instead of once per query head (4x fewer cache bytes for 32 heads over 8 KV
// heads), and the share count is chosen to fill the SMs (ops/attention_gqa_plan.h). A combine
// kernel (attention_combine.cu) merges the shares. Host launcher only.
//
// Same arguments and result as attention_split() (attention.cuh) without capture; `splits` in
// 1..gqa::kMaxSplits, scratch of gqa::scratch_floats(tokens, heads, head_dim, splits) floats.
// Why a separate kernel and not a change of attention_split: the old kernels stay as the
// self-test's and the kernel lab's second opinion (and for shapes this one does not take).
#include <cstddef>
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::kv {
enum class ElementType;
}

namespace tokenscope::cuda::ops {

// Whether attention_gqa takes this shape: heads a multiple of kv_heads, head_dim a multiple of 8
// (8-element row loads), caches aligned for them (16 bytes for F32/F16, 8 for Q8), shared memory within the 48 KiB every block may
// use without opting in (the 1B model, 4 heads of 64 per KV head: 11 KB; Gemma 3 270M, 4 heads
// of 256: 41 KB).
bool attention_gqa_supports(kv::ElementType type, int heads, int kv_heads, int head_dim, const void* k_cache,
                            const void* v_cache);

// The number of SMs of the current device (cached after the first call).
int device_sm_count();

void attention_gqa(const float* q, int tokens, int heads, int kv_heads, int head_dim, const std::int32_t* token_pos,
                   const std::int32_t* token_slot_begin, const std::int64_t* slot_table, const void* k_cache,
                   const void* v_cache, const float* k_scales, const float* v_scales, kv::ElementType type,
                   float score_scale, int window, int splits, float* scratch, float* out, cudaStream_t s);

// The combine kernel on its own (attention_combine.cu): out[t][h] from the shares' partials.
void attention_combine(const std::int32_t* token_pos, int tokens, int heads, int head_dim, int splits,
                       const float* scratch, float* out, cudaStream_t s);

}  // namespace tokenscope::cuda::ops
