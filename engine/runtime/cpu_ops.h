#pragma once
// Element-wise and row-wise operations of the forward pass on f32 rows. Plain loops the
// compiler vectorises; the matrix products live in tensor/matmul.h.
#include <cstdint>
#include <span>

namespace tokenscope::runtime::ops {

// out = x / sqrt(mean(x^2) + eps) * weight   (weight may be null: no scaling)
void rms_norm(const float* x, const float* weight, float* out, std::int64_t n, float eps);

// Rotates the first `rope_dims` dims of one head in place. `inv_freq` holds rope_dims / 2
// inverse frequencies base^(-2i / rope_dims). `neox`: pairs (i, i + rope_dims/2), else
// (2i, 2i+1).
void rope(float* head, std::int64_t rope_dims, double position, const float* inv_freq, bool neox);

// In place: gate = act(gate) * up.
void silu_mul(float* gate, const float* up, std::int64_t n);
void gelu_tanh_mul(float* gate, const float* up, std::int64_t n);

// In place softmax over x; returns the max logit (for callers that want log-sum-exp).
float softmax(std::span<float> x);

void add(float* x, const float* y, std::int64_t n);  // x += y
void scale(float* x, float s, std::int64_t n);       // x *= s

}  // namespace tokenscope::runtime::ops
