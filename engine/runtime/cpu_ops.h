#pragma once
// Element-wise and row-wise operations of the forward pass on f32 rows; the matrix products
// live in tensor/matmul.h. rms_norm, silu_mul, gelu_tanh_mul and softmax have an AVX2+FMA
// version (polynomial exp) chosen at run time from tensor::active_simd_level(), and a portable
// one (std::exp) under TOKENSCOPE_SIMD=scalar; test_cpu_ops states and checks both against
// float64. Every result depends only on the row itself (not its address, nor where it sits
// in a batch), so decode and prefill agree bit for bit.
#include <cstdint>
#include <span>

namespace tokenscope::runtime::ops {

// out = x / sqrt(mean(x^2) + eps) * weight   (weight may be null: no scaling)
void rms_norm(const float* x, const float* weight, float* out, std::int64_t n, float eps);

// The rotation angles of one position: cos[i] and sin[i] of position * inv_freq[i] for
// i < pairs, computed in double and rounded to float. Shared by every head (q and k) of a token.
void rope_angles(double position, const float* inv_freq, std::int64_t pairs, float* cos,
                 float* sin);

// Rotates the first `rope_dims` dims of one head in place by the angles of rope_angles (rope_dims
// / 2 of each). `neox`: pairs (i, i + rope_dims/2), else (2i, 2i+1).
void rope(float* head, std::int64_t rope_dims, const float* cos, const float* sin, bool neox);

// In place: gate = act(gate) * up.
void silu_mul(float* gate, const float* up, std::int64_t n);
void gelu_tanh_mul(float* gate, const float* up, std::int64_t n);

// In place softmax over x; returns the max logit (for callers that want log-sum-exp).
float softmax(std::span<float> x);

// Plain loops the compiler vectorises (memory-bound; SSE2 is as fast as wider vectors here).
void add(float* x, const float* y, std::int64_t n);  // x += y
void scale(float* x, float s, std::int64_t n);       // x *= s

}  // namespace tokenscope::runtime::ops
