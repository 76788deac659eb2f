#include "runtime/cpu_ops.h"

#include <algorithm>
#include <cmath>

namespace tokenscope::runtime::ops {

void rms_norm(const float* x, const float* weight, float* out, std::int64_t n, float eps) {
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

void rope(float* head, std::int64_t rope_dims, double position, const float* inv_freq, bool neox) {
    const std::int64_t half = rope_dims / 2;
    for (std::int64_t i = 0; i < half; ++i) {
        const double angle = position * static_cast<double>(inv_freq[i]);
        const float c = static_cast<float>(std::cos(angle));
        const float s = static_cast<float>(std::sin(angle));
        float& a = neox ? head[i] : head[2 * i];
        float& b = neox ? head[i + half] : head[2 * i + 1];
        const float x0 = a, x1 = b;
        a = x0 * c - x1 * s;
        b = x0 * s + x1 * c;
    }
}

void silu_mul(float* gate, const float* up, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        gate[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void gelu_tanh_mul(float* gate, const float* up, std::int64_t n) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (std::int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
        gate[i] = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
    }
}

float softmax(std::span<float> x) {
    if (x.empty()) return 0.0f;
    const float max = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (float& v : x) {
        v = std::exp(v - max);
        sum += v;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (float& v : x) v *= inv;
    return max;
}

void add(float* x, const float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void scale(float* x, float s, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace tokenscope::runtime::ops
