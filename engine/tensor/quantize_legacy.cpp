// Round-to-nearest quantizers for the 32-element formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0.
//
// Symmetric formats (Q4_0, Q5_0) map the element of largest magnitude to the most negative code
// (-8 / -16), so that the asymmetric code range [-8, 7] is used on the side where it matters;
// elements of the opposite sign near that magnitude clip at +7 / +15. Affine formats (Q4_1, Q5_1)
// spread [min, max] over all codes. Q8_0 maps amax to 127.
#include <cmath>

#include "tensor/block_layouts.h"
#include "tensor/quantize_common.h"
#include "tensor/row_kernels.h"

namespace tokenscope::tensor::detail {

namespace {

// Codes 0..2*half-1 for one symmetric block (value = d * (code - half)); returns d.
HalfScale quantize_symmetric_32(const float* x, int half, int (&codes)[32]) {
    float amax = 0.0f;
    float signed_max = 0.0f;
    for (int j = 0; j < 32; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            signed_max = x[j];
        }
    }
    const HalfScale d = to_half_scale(signed_max / static_cast<float>(-half));
    const float inverse = d.value != 0.0f ? 1.0f / d.value : 0.0f;
    for (int j = 0; j < 32; ++j) {
        codes[j] = round_clamp(x[j] * inverse + static_cast<float>(half), 0, 2 * half - 1);
    }
    return d;
}

struct AffineBlock {
    HalfScale d;
    HalfScale m;
};

// Codes 0..levels-1 for one affine block (value = d * code + m).
AffineBlock quantize_affine_32(const float* x, int levels, int (&codes)[32]) {
    float lo = x[0];
    float hi = x[0];
    for (int j = 1; j < 32; ++j) {
        lo = std::fmin(lo, x[j]);
        hi = std::fmax(hi, x[j]);
    }
    const HalfScale d = to_half_scale((hi - lo) / static_cast<float>(levels - 1));
    const HalfScale m = to_half_scale(lo);
    const float inverse = d.value != 0.0f ? 1.0f / d.value : 0.0f;
    for (int j = 0; j < 32; ++j) codes[j] = round_clamp((x[j] - m.value) * inverse, 0, levels - 1);
    return {d, m};
}

// Low nibbles of codes 0..15 and high nibbles of codes 16..31, as Q4/Q5 blocks store them.
void pack_nibbles(const int (&codes)[32], std::uint8_t (&qs)[16]) {
    for (int j = 0; j < 16; ++j) {
        qs[j] = static_cast<std::uint8_t>((codes[j] & 0xF) | ((codes[j + 16] & 0xF) << 4));
    }
}

// Bit 4 of code e goes to bit e of the little-endian word qh.
void pack_fifth_bits(const int (&codes)[32], std::uint8_t (&qh)[4]) {
    std::uint32_t bits = 0;
    for (int j = 0; j < 32; ++j) bits |= static_cast<std::uint32_t>((codes[j] >> 4) & 1) << j;
    for (int i = 0; i < 4; ++i) qh[i] = static_cast<std::uint8_t>(bits >> (8 * i));
}

// --- importance-weighted variants -------------------------------------------------------
// Each element j of a row carries a weight w_j = importance_j * sqrt(sigma2 + x_j^2) (sigma2:
// the row's mean square), importance_j being the mean squared activation its column sees
// (the imatrix). The block's scale (and offset) are chosen to minimise the weighted squared
// error sum_j w_j (x_j - deq_j)^2 instead of being fixed by the block's extremes: a few grids
// around the round-to-nearest one are tried, each refined by weighted least squares over the
// codes it gives; the round-to-nearest choice is a candidate too, so the weighted error never
// comes out worse than it (before the final f16 rounding of the scale).

constexpr int kWeightedSteps = 10;
constexpr float kWeightedStep = 0.1f;

void element_weights(const float* x, const float* importance, std::int64_t n, std::int64_t block, float* w) {
    double sum_x2 = 0.0;
    for (std::int64_t j = 0; j < n; ++j) sum_x2 += static_cast<double>(x[j]) * x[j];
    const float sigma2 = static_cast<float>(sum_x2 / static_cast<double>(n));
    (void)block;
    for (std::int64_t j = 0; j < n; ++j) w[j] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// value = d * q, q in [-nneg, npos]; returns the best d (may be negative, like the RTN one).
float weighted_symmetric_scale(const float* x, const float* w, int n, int nneg, int npos) {
    float amax = 0.0f;
    float signed_max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            signed_max = x[j];
        }
    }
    if (!(amax > 0.0f)) return 0.0f;
    auto error_of = [&](float d) {
        const float inverse = 1.0f / d;
        double e = 0.0;
        for (int j = 0; j < n; ++j) {
            const double diff = static_cast<double>(d) * round_clamp(x[j] * inverse, -nneg, npos) - x[j];
            e += w[j] * diff * diff;
        }
        return e;
    };
    float best = signed_max / static_cast<float>(-nneg);
    double best_error = error_of(best);
    for (int k = -kWeightedSteps; k <= kWeightedSteps; ++k) {
        const float inverse = -(static_cast<float>(nneg) + kWeightedStep * static_cast<float>(k)) / signed_max;
        double sqq = 0.0, sqx = 0.0;
        for (int j = 0; j < n; ++j) {
            const int q = round_clamp(x[j] * inverse, -nneg, npos);
            sqq += static_cast<double>(w[j]) * q * q;
            sqx += static_cast<double>(w[j]) * q * x[j];
        }
        if (!(sqq > 0.0) || sqx == 0.0) continue;
        const float d = static_cast<float>(sqx / sqq);
        const double e = error_of(d);
        if (e < best_error) {
            best_error = e;
            best = d;
        }
    }
    return best;
}

// value = d * q + m, q in [0, nmax].
struct WeightedAffine {
    float d;
    float m;
};

WeightedAffine weighted_affine_fit(const float* x, const float* w, int n, int nmax) {
    float lo = x[0];
    float hi = x[0];
    for (int j = 1; j < n; ++j) {
        lo = std::fmin(lo, x[j]);
        hi = std::fmax(hi, x[j]);
    }
    if (!(hi > lo)) return {0.0f, lo};
    auto error_of = [&](float d, float m) {
        const float inverse = 1.0f / d;
        double e = 0.0;
        for (int j = 0; j < n; ++j) {
            const double diff = static_cast<double>(d) * round_clamp((x[j] - m) * inverse, 0, nmax) + m - x[j];
            e += w[j] * diff * diff;
        }
        return e;
    };
    WeightedAffine best{(hi - lo) / static_cast<float>(nmax), lo};
    double best_error = error_of(best.d, best.m);
    for (int k = -kWeightedSteps; k <= kWeightedSteps; ++k) {
        const float inverse = (static_cast<float>(nmax) + kWeightedStep * static_cast<float>(k)) / (hi - lo);
        double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
        for (int j = 0; j < n; ++j) {
            const double q = round_clamp((x[j] - lo) * inverse, 0, nmax);
            sw += w[j];
            sq += w[j] * q;
            sqq += w[j] * q * q;
            sx += static_cast<double>(w[j]) * x[j];
            sqx += w[j] * q * x[j];
        }
        const double det = sw * sqq - sq * sq;
        if (!(det > 0.0)) continue;
        const double a = (sw * sqx - sq * sx) / det;
        const double b = (sqq * sx - sq * sqx) / det;
        if (!(a > 0.0)) continue;
        const double e = error_of(static_cast<float>(a), static_cast<float>(b));
        if (e < best_error) {
            best_error = e;
            best = {static_cast<float>(a), static_cast<float>(b)};
        }
    }
    return best;
}

HalfScale weighted_symmetric_32(const float* x, const float* w, int half, int (&codes)[32]) {
    const HalfScale d = to_half_scale(weighted_symmetric_scale(x, w, 32, half, half - 1));
    const float inverse = d.value != 0.0f ? 1.0f / d.value : 0.0f;
    for (int j = 0; j < 32; ++j) codes[j] = round_clamp(x[j] * inverse + static_cast<float>(half), 0, 2 * half - 1);
    return d;
}

AffineBlock weighted_affine_32(const float* x, const float* w, int levels, int (&codes)[32]) {
    const WeightedAffine fit = weighted_affine_fit(x, w, 32, levels - 1);
    const HalfScale d = to_half_scale(fit.d);
    const HalfScale m = to_half_scale(fit.m);
    const float inverse = d.value != 0.0f ? 1.0f / d.value : 0.0f;
    for (int j = 0; j < 32; ++j) codes[j] = round_clamp((x[j] - m.value) * inverse, 0, levels - 1);
    return {d, m};
}

}  // namespace

void importance_weights(const float* x, const float* importance, std::int64_t n, float* w) {
    element_weights(x, importance, n, n, w);
}

void quantize_row_q4_0_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ4_0*>(blocks);
    for (std::int64_t b = 0; b < n / QK4_0; ++b, in += QK4_0, w += QK4_0) {
        int codes[32];
        store_f16(y[b].d, weighted_symmetric_32(in, w, 8, codes).bits);
        pack_nibbles(codes, y[b].qs);
    }
}

void quantize_row_q5_0_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ5_0*>(blocks);
    for (std::int64_t b = 0; b < n / QK5_0; ++b, in += QK5_0, w += QK5_0) {
        int codes[32];
        store_f16(y[b].d, weighted_symmetric_32(in, w, 16, codes).bits);
        pack_fifth_bits(codes, y[b].qh);
        pack_nibbles(codes, y[b].qs);
    }
}

void quantize_row_q4_1_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ4_1*>(blocks);
    for (std::int64_t b = 0; b < n / QK4_1; ++b, in += QK4_1, w += QK4_1) {
        int codes[32];
        const AffineBlock block = weighted_affine_32(in, w, 16, codes);
        store_f16(y[b].d, block.d.bits);
        store_f16(y[b].m, block.m.bits);
        pack_nibbles(codes, y[b].qs);
    }
}

void quantize_row_q5_1_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ5_1*>(blocks);
    for (std::int64_t b = 0; b < n / QK5_1; ++b, in += QK5_1, w += QK5_1) {
        int codes[32];
        const AffineBlock block = weighted_affine_32(in, w, 32, codes);
        store_f16(y[b].d, block.d.bits);
        store_f16(y[b].m, block.m.bits);
        pack_fifth_bits(codes, y[b].qh);
        pack_nibbles(codes, y[b].qs);
    }
}

void quantize_row_q4_0(const float* in, void* blocks, std::int64_t n) {
    auto* y = static_cast<BlockQ4_0*>(blocks);
    for (std::int64_t b = 0; b < n / QK4_0; ++b, in += QK4_0) {
        int codes[32];
        store_f16(y[b].d, quantize_symmetric_32(in, 8, codes).bits);
        pack_nibbles(codes, y[b].qs);
    }
}

void quantize_row_q4_1(const float* in, void* blocks, std::int64_t n) {
    auto* y = static_cast<BlockQ4_1*>(blocks);
    for (std::int64_t b = 0; b < n / QK4_1; ++b, in += QK4_1) {
        int codes[32];
        const AffineBlock block = quantize_affine_32(in, 16, codes);
        store_f16(y[b].d, block.d.bits);
        store_f16(y[b].m, block.m.bits);
        pack_nibbles(codes, y[b].qs);
    }
}

void quantize_row_q5_0(const float* in, void* blocks, std::int64_t n) {
    auto* y = static_cast<BlockQ5_0*>(blocks);
    for (std::int64_t b = 0; b < n / QK5_0; ++b, in += QK5_0) {
        int codes[32];
        store_f16(y[b].d, quantize_symmetric_32(in, 16, codes).bits);
        pack_fifth_bits(codes, y[b].qh);
        pack_nibbles(codes, y[b].qs);
    }
}

void quantize_row_q5_1(const float* in, void* blocks, std::int64_t n) {
    auto* y = static_cast<BlockQ5_1*>(blocks);
    for (std::int64_t b = 0; b < n / QK5_1; ++b, in += QK5_1) {
        int codes[32];
        const AffineBlock block = quantize_affine_32(in, 32, codes);
        store_f16(y[b].d, block.d.bits);
        store_f16(y[b].m, block.m.bits);
        pack_fifth_bits(codes, y[b].qh);
        pack_nibbles(codes, y[b].qs);
    }
}

void quantize_row_q8_0(const float* in, void* blocks, std::int64_t n) {
    auto* y = static_cast<BlockQ8_0*>(blocks);
    for (std::int64_t b = 0; b < n / QK8_0; ++b, in += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(in[j]));
        const HalfScale d = to_half_scale(amax / 127.0f);
        const float inverse = d.value != 0.0f ? 1.0f / d.value : 0.0f;
        store_f16(y[b].d, d.bits);
        for (int j = 0; j < QK8_0; ++j) {
            y[b].qs[j] = static_cast<std::int8_t>(round_clamp(in[j] * inverse, -127, 127));
        }
    }
}

}  // namespace tokenscope::tensor::detail
