#include "runtime/cpu_ops.h"

#include <algorithm>
#include <cmath>

#include "runtime/cpu_ops_kernels.h"
#include "tensor/matmul.h"

namespace tokenscope::runtime::ops {

namespace detail {
namespace {

void exp_nonpositive_portable(const float* x, float* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i]);
}

void rms_norm_portable(const float* x, const float* weight, float* out, std::int64_t n, float eps) {
    // Accumulate in double: rows are short and this keeps the engine within 1e-6 of the
    // float64 reference regardless of the row's magnitude.
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
    if (weight) {
        for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
    } else {
        for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
    }
}

void silu_mul_portable(float* gate, const float* up, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        gate[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

// 0.5 g (1 + tanh(z)) written as g / (1 + exp(-2z)): the same function, one exp instead of a
// tanh, and no cancellation in 1 + tanh(z) for z < 0 (the AVX2 kernel computes the same).
void gelu_tanh_mul_portable(float* gate, const float* up, std::int64_t n) {
    constexpr float kTwoSqrt2OverPi = 2.0f * 0.7978845608028654f;
    for (std::int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        const float z = kTwoSqrt2OverPi * (g + 0.044715f * (g * g * g));
        gate[i] = g / (1.0f + std::exp(-z)) * up[i];
    }
}

float softmax_portable(float* x, std::int64_t n) {
    const float max = *std::max_element(x, x + n);
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
    return max;
}

constexpr OpKernels kPortable{"portable",        exp_nonpositive_portable, rms_norm_portable,
                              silu_mul_portable, gelu_tanh_mul_portable,   softmax_portable};

}  // namespace

const OpKernels& portable_op_kernels() {
    return kPortable;
}

const OpKernels& active_op_kernels() {
    // AVX2 above scalar, with the AVX-512 softmax at that level (attention's softmax; the other
    // ops are a few percent of a forward pass).
    static const OpKernels* const avx2 = avx2_op_kernels();
    static const OpKernels* const avx512 = avx512_op_kernels();
    const tensor::SimdLevel level = tensor::active_simd_level();
    if (avx512 && level == tensor::SimdLevel::Avx512) return *avx512;
    if (avx2 && level != tensor::SimdLevel::Scalar) return *avx2;
    return kPortable;
}

}  // namespace detail

void rms_norm(const float* x, const float* weight, float* out, std::int64_t n, float eps) {
    detail::active_op_kernels().rms_norm(x, weight, out, n, eps);
}

void rope_angles(double position, const float* inv_freq, std::int64_t pairs, float* cos,
                 float* sin) {
    for (std::int64_t i = 0; i < pairs; ++i) {
        const double angle = position * static_cast<double>(inv_freq[i]);
        cos[i] = static_cast<float>(std::cos(angle));
        sin[i] = static_cast<float>(std::sin(angle));
    }
}

void rope(float* head, std::int64_t rope_dims, const float* cos, const float* sin, bool neox) {
    const std::int64_t half = rope_dims / 2;
    for (std::int64_t i = 0; i < half; ++i) {
        float& a = neox ? head[i] : head[2 * i];
        float& b = neox ? head[i + half] : head[2 * i + 1];
        const float x0 = a, x1 = b;
        a = x0 * cos[i] - x1 * sin[i];
        b = x0 * sin[i] + x1 * cos[i];
    }
}

void silu_mul(float* gate, const float* up, std::int64_t n) {
    detail::active_op_kernels().silu_mul(gate, up, n);
}

void gelu_tanh_mul(float* gate, const float* up, std::int64_t n) {
    detail::active_op_kernels().gelu_tanh_mul(gate, up, n);
}

float softmax(std::span<float> x) {
    if (x.empty()) return 0.0f;
    return detail::active_op_kernels().softmax(x.data(), static_cast<std::int64_t>(x.size()));
}

void add(float* x, const float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void scale(float* x, float s, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace tokenscope::runtime::ops
