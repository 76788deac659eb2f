#pragma once
// Per-format row functions behind the type table (type_table.cpp). Internal to engine/tensor:
// callers go through tensor::dequantize_row / quantize_row, which check the row length, so
// these assume `n` is a whole number of blocks.
#include <cstdint>

namespace tokenscope::tensor::detail {

// float_rows.cpp
void dequantize_row_f32(const void* blocks, float* out, std::int64_t n);
void dequantize_row_f16(const void* blocks, float* out, std::int64_t n);
void dequantize_row_bf16(const void* blocks, float* out, std::int64_t n);
void quantize_row_f32(const float* in, void* blocks, std::int64_t n);
void quantize_row_f16(const float* in, void* blocks, std::int64_t n);
void quantize_row_bf16(const float* in, void* blocks, std::int64_t n);

// dequantize_legacy.cpp
void dequantize_row_q4_0(const void* blocks, float* out, std::int64_t n);
void dequantize_row_q4_1(const void* blocks, float* out, std::int64_t n);
void dequantize_row_q5_0(const void* blocks, float* out, std::int64_t n);
void dequantize_row_q5_1(const void* blocks, float* out, std::int64_t n);
void dequantize_row_q8_0(const void* blocks, float* out, std::int64_t n);

// dequantize_kquants.cpp
void dequantize_row_q2_k(const void* blocks, float* out, std::int64_t n);
void dequantize_row_q3_k(const void* blocks, float* out, std::int64_t n);
void dequantize_row_q4_k(const void* blocks, float* out, std::int64_t n);
void dequantize_row_q5_k(const void* blocks, float* out, std::int64_t n);
void dequantize_row_q6_k(const void* blocks, float* out, std::int64_t n);

// quantize_legacy.cpp
void quantize_row_q4_0(const float* in, void* blocks, std::int64_t n);
void quantize_row_q4_1(const float* in, void* blocks, std::int64_t n);
void quantize_row_q5_0(const float* in, void* blocks, std::int64_t n);
void quantize_row_q5_1(const float* in, void* blocks, std::int64_t n);
void quantize_row_q8_0(const float* in, void* blocks, std::int64_t n);

// quantize_kquants.cpp
void quantize_row_q2_k(const float* in, void* blocks, std::int64_t n);
void quantize_row_q3_k(const float* in, void* blocks, std::int64_t n);
void quantize_row_q4_k(const float* in, void* blocks, std::int64_t n);
void quantize_row_q5_k(const float* in, void* blocks, std::int64_t n);
void quantize_row_q6_k(const float* in, void* blocks, std::int64_t n);

// Importance-weighted variants (quantize_legacy.cpp, quantize_kquants.cpp): `w` holds one
// weight per element of the row (importance_weights); null means all 1 (the K-quants then
// give exactly the unweighted result).
void importance_weights(const float* x, const float* importance, std::int64_t n, float* w);
void quantize_row_q4_0_weighted(const float* in, void* blocks, std::int64_t n, const float* w);
void quantize_row_q4_1_weighted(const float* in, void* blocks, std::int64_t n, const float* w);
void quantize_row_q5_0_weighted(const float* in, void* blocks, std::int64_t n, const float* w);
void quantize_row_q5_1_weighted(const float* in, void* blocks, std::int64_t n, const float* w);
void quantize_row_q2_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w);
void quantize_row_q3_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w);
void quantize_row_q4_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w);
void quantize_row_q5_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w);
void quantize_row_q6_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w);

}  // namespace tokenscope::tensor::detail
