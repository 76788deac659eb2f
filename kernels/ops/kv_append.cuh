#pragma once
// Writes new K/V rows into one layer of the device KV cache. Host launcher only.
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::kv {
enum class ElementType;
}

namespace tokenscope::cuda::ops {

// Token t's K and V (k, v: [tokens][kv_heads * head_dim] floats, head-major) go to physical slot
// slots[t] (device array of `tokens` int64) of ONE layer's cache. Layout (the element
// conversions are kv::KvStorage's; its CPU rows are ordered by block and head instead):
// values [slot][kv_head][head_dim] of the element type (F32; F16 = IEEE half, round to nearest
// even; Q8 = int8), Q8 scales [slot][kv_head] floats in k_scales / v_scales (ignored, may be
// nullptr, for F32/F16). Q8 row: scale = max|x| / 127, q = round(x / scale) clamped to +-127; an
// all-zero row stores scale 0 and zeros. A negative slot skips that token (padding).
void kv_append(const float* k, const float* v, int tokens, const std::int64_t* slots, void* k_cache,
               void* v_cache, float* k_scales, float* v_scales, int kv_heads, int head_dim,
               kv::ElementType type, cudaStream_t s);

}  // namespace tokenscope::cuda::ops
