// Quantizers for the K-quant super-blocks Q2_K .. Q6_K.
//
// Two stages, both simple and deterministic:
//  1. each sub-block (16 or 32 elements) gets its own float scale (and, for the affine formats,
//     a non-negative offset) from a small search: a few candidate grids around
//     "range / levels", each refined by a least-squares fit of scale/offset to the codes it
//     produced; the candidate with the smallest squared error wins;
//  2. the sub-block scales/offsets are themselves quantized (4, 6 or 8 bits) under the
//     super-block's f16 d / dmin, and the elements are then re-quantized against the scales
//     exactly as the dequantizer will reconstruct them.
// Codes are placed into the block by element index (see block_layouts.h), which is a different
// walk from the dequantizers' storage-order loops: the round-trip tests check one against the
// other.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/block_layouts.h"
#include "tensor/kquant_scales.h"
#include "tensor/quantize_common.h"
#include "tensor/row_kernels.h"

namespace tokenscope::tensor::detail {

namespace {

// Candidate grids are (levels + k * kGridStep) codes across the range, k in [-kGridSteps,
// kGridSteps].
constexpr int kGridSteps = 8;
constexpr float kGridStep = 0.125f;

// x ~= scale * q - offset, q in [0, nmax], scale >= 0, offset >= 0 (the formats store the
// offset as an unsigned 'min' that is subtracted, so a sub-block can only be shifted down).
struct AffineFit {
    float scale;
    float offset;
};

// w: per-element weights of the squared error (null: all 1).
AffineFit fit_affine(const float* x, const float* w, int n, int nmax) {
    float lo = 0.0f;  // offset >= 0 means the grid must reach down to min(0, min x)
    float hi = x[0];
    for (int i = 0; i < n; ++i) {
        lo = std::fmin(lo, x[i]);
        hi = std::fmax(hi, x[i]);
    }
    const float range = hi - lo;
    if (!(range > 0.0f)) return {0.0f, -lo};

    AffineFit best{range / static_cast<float>(nmax), -lo};
    double best_error = INFINITY;
    for (int k = -kGridSteps; k <= kGridSteps; ++k) {
        const float inverse =
            (static_cast<float>(nmax) + kGridStep * static_cast<float>(k)) / range;
        // Least squares of x ~= a * q + b over the codes this grid gives.
        double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
        int q[32];
        for (int i = 0; i < n; ++i) {
            const double wi = w ? w[i] : 1.0;
            q[i] = round_clamp((x[i] - lo) * inverse, 0, nmax);
            sw += wi;
            sq += wi * q[i];
            sqq += wi * static_cast<double>(q[i]) * q[i];
            sx += wi * x[i];
            sqx += wi * static_cast<double>(q[i]) * x[i];
        }
        double a = 0;
        double b = 0;
        const double det = sw * sqq - sq * sq;
        if (det > 0) {
            a = (sw * sqx - sq * sx) / det;
            b = (sqq * sx - sq * sqx) / det;
        }
        if (b > 0 || det <= 0) {
            // The best fit wants to shift up, which the format cannot store: fit a scale alone.
            b = 0;
            a = sqq > 0 ? sqx / sqq : 0;
        }
        if (!(a > 0)) continue;
        double error = 0;
        if (w) {
            // Weighted: judge the fit by the codes it will really get (x re-rounded against a, b),
            // not by the grid's codes; a weighted fit can otherwise shrink the scale so far that
            // the re-rounded codes clip.
            const float inverse_a = static_cast<float>(1.0 / a);
            for (int i = 0; i < n; ++i) {
                const int qi = round_clamp((x[i] - static_cast<float>(b)) * inverse_a, 0, nmax);
                const double diff = a * qi + b - x[i];
                error += w[i] * diff * diff;
            }
        } else {
            for (int i = 0; i < n; ++i) {
                const double diff = a * q[i] + b - x[i];
                error += diff * diff;
            }
        }
        if (error < best_error) {
            best_error = error;
            best = {static_cast<float>(a), static_cast<float>(-b)};
        }
    }
    return best;
}

// x ~= scale * q, q in [-nneg, npos]; the scale may be negative so that the element of largest
// magnitude can use the longer (negative) side of the code range whatever its sign.
float fit_symmetric(const float* x, const float* w, int n, int nneg, int npos) {
    float amax = 0.0f;
    float signed_max = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            signed_max = x[i];
        }
    }
    if (!(amax > 0.0f)) return 0.0f;

    float best = signed_max / static_cast<float>(-nneg);
    double best_error = INFINITY;
    for (int k = -kGridSteps; k <= kGridSteps; ++k) {
        const float inverse =
            -(static_cast<float>(nneg) + kGridStep * static_cast<float>(k)) / signed_max;
        double sqq = 0, sqx = 0;
        int q[32];
        for (int i = 0; i < n; ++i) {
            const double wi = w ? w[i] : 1.0;
            q[i] = round_clamp(x[i] * inverse, -nneg, npos);
            sqq += wi * static_cast<double>(q[i]) * q[i];
            sqx += wi * static_cast<double>(q[i]) * x[i];
        }
        if (!(sqq > 0)) continue;
        const double a = sqx / sqq;
        double error = 0;
        if (w) {
            // Weighted: judge the scale by the codes x re-rounded against it (see fit_affine).
            if (a == 0) continue;
            const float inverse_a = static_cast<float>(1.0 / a);
            for (int i = 0; i < n; ++i) {
                const int qi = round_clamp(x[i] * inverse_a, -nneg, npos);
                const double diff = a * qi - x[i];
                error += w[i] * diff * diff;
            }
        } else {
            for (int i = 0; i < n; ++i) {
                const double diff = a * q[i] - x[i];
                error += diff * diff;
            }
        }
        if (error < best_error) {
            best_error = error;
            best = static_cast<float>(a);
        }
    }
    return best;
}

// Stage 2 for the affine formats: sub-block scales/offsets to `max_code`-bit integers under
// d / dmin, then the element codes against the reconstructed values.
struct AffineSuperBlock {
    HalfScale d;
    HalfScale dmin;
    std::uint8_t sc[16];
    std::uint8_t m[16];
    int q[QK_K];
};

void quantize_affine_super_block(const float* x, const float* w, int sub_size, int nmax, int max_code,
                                 AffineSuperBlock& out) {
    const int subs = QK_K / sub_size;
    AffineFit fits[16];
    float max_scale = 0.0f;
    float max_offset = 0.0f;
    for (int s = 0; s < subs; ++s) {
        fits[s] = fit_affine(x + s * sub_size, w ? w + s * sub_size : nullptr, sub_size, nmax);
        max_scale = std::fmax(max_scale, fits[s].scale);
        max_offset = std::fmax(max_offset, fits[s].offset);
    }
    out.d = to_half_scale(max_scale / static_cast<float>(max_code));
    out.dmin = to_half_scale(max_offset / static_cast<float>(max_code));
    const float inverse_d = out.d.value > 0.0f ? 1.0f / out.d.value : 0.0f;
    const float inverse_dmin = out.dmin.value > 0.0f ? 1.0f / out.dmin.value : 0.0f;
    for (int s = 0; s < subs; ++s) {
        out.sc[s] = static_cast<std::uint8_t>(round_clamp(fits[s].scale * inverse_d, 0, max_code));
        out.m[s] =
            static_cast<std::uint8_t>(round_clamp(fits[s].offset * inverse_dmin, 0, max_code));
        // Same float expressions as the dequantizer, so codes target what will be read back.
        const float scale = out.d.value * static_cast<float>(out.sc[s]);
        const float offset = out.dmin.value * static_cast<float>(out.m[s]);
        const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
        for (int i = s * sub_size; i < (s + 1) * sub_size; ++i) {
            out.q[i] = round_clamp((x[i] + offset) * inverse, 0, nmax);
        }
    }
}

// Stage 2 for the symmetric formats (Q3_K, Q6_K): signed sub-block scales in [-max_code,
// max_code] under a positive d.
struct SymmetricSuperBlock {
    HalfScale d;
    int sc[16];
    int q[QK_K];
};

void quantize_symmetric_super_block(const float* x, const float* w, int nneg, int npos, int max_code,
                                    SymmetricSuperBlock& out) {
    float scales[16];
    float amax = 0.0f;
    for (int s = 0; s < 16; ++s) {
        scales[s] = fit_symmetric(x + 16 * s, w ? w + 16 * s : nullptr, 16, nneg, npos);
        amax = std::fmax(amax, std::fabs(scales[s]));
    }
    out.d = to_half_scale(amax / static_cast<float>(max_code));
    const float inverse_d = out.d.value > 0.0f ? 1.0f / out.d.value : 0.0f;
    for (int s = 0; s < 16; ++s) {
        out.sc[s] = round_clamp(scales[s] * inverse_d, -max_code, max_code);
        const float scale = out.d.value * static_cast<float>(out.sc[s]);
        const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
        for (int i = 16 * s; i < 16 * s + 16; ++i)
            out.q[i] = round_clamp(x[i] * inverse, -nneg, npos);
    }
}

// Q2_K / Q3_K low 2 bits of element e: qs[32*(e/128) + e%32], bit 2*((e%128)/32).
void pack_two_bits(const int* codes, std::uint8_t* qs) {
    std::memset(qs, 0, QK_K / 4);
    for (int e = 0; e < QK_K; ++e) {
        qs[32 * (e / 128) + e % 32] |=
            static_cast<std::uint8_t>((codes[e] & 3) << (2 * ((e % 128) / 32)));
    }
}

// Q4_K / Q5_K low 4 bits of element e: qs[32*(e/64) + e%32], high nibble when (e/32) is odd.
void pack_four_bits_k(const int* codes, std::uint8_t* qs) {
    std::memset(qs, 0, QK_K / 2);
    for (int e = 0; e < QK_K; ++e) {
        qs[32 * (e / 64) + e % 32] |=
            static_cast<std::uint8_t>((codes[e] & 0xF) << (4 * ((e / 32) % 2)));
    }
}

// Q3_K / Q5_K extra bit of element e: bit (e/32) of byte e%32. `bit` selects which code bit.
void pack_high_bit(const int* codes, int bit, std::uint8_t* mask) {
    std::memset(mask, 0, QK_K / 8);
    for (int e = 0; e < QK_K; ++e) {
        if ((codes[e] >> bit) & 1) mask[e % 32] |= static_cast<std::uint8_t>(1u << (e / 32));
    }
}

}  // namespace

void quantize_row_q2_k(const float* in, void* blocks, std::int64_t n) {
    quantize_row_q2_k_weighted(in, blocks, n, nullptr);
}

void quantize_row_q2_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ2_K*>(blocks);
    AffineSuperBlock sb;
    for (std::int64_t b = 0; b < n / QK_K; ++b, in += QK_K, w = w ? w + QK_K : nullptr) {
        quantize_affine_super_block(in, w, 16, 3, 15, sb);
        store_f16(y[b].d, sb.d.bits);
        store_f16(y[b].dmin, sb.dmin.bits);
        for (int s = 0; s < 16; ++s)
            y[b].scales[s] = static_cast<std::uint8_t>(sb.sc[s] | (sb.m[s] << 4));
        pack_two_bits(sb.q, y[b].qs);
    }
}

void quantize_row_q3_k(const float* in, void* blocks, std::int64_t n) {
    quantize_row_q3_k_weighted(in, blocks, n, nullptr);
}

void quantize_row_q3_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ3_K*>(blocks);
    SymmetricSuperBlock sb;
    for (std::int64_t b = 0; b < n / QK_K; ++b, in += QK_K, w = w ? w + QK_K : nullptr) {
        // Sub-block scales are 6-bit signed (stored +32); keep them in [-31, 31].
        quantize_symmetric_super_block(in, w, 4, 3, 31, sb);
        store_f16(y[b].d, sb.d.bits);
        std::uint8_t u[16];
        for (int s = 0; s < 16; ++s) u[s] = static_cast<std::uint8_t>(sb.sc[s] + 32);
        pack_scales_q3_k(u, y[b].scales);
        // Stored code u = q + 4: low 2 bits in qs, bit 2 in hmask (set means "do not subtract 4").
        int codes[QK_K];
        for (int e = 0; e < QK_K; ++e) codes[e] = sb.q[e] + 4;
        pack_two_bits(codes, y[b].qs);
        pack_high_bit(codes, 2, y[b].hmask);
    }
}

void quantize_row_q4_k(const float* in, void* blocks, std::int64_t n) {
    quantize_row_q4_k_weighted(in, blocks, n, nullptr);
}

void quantize_row_q4_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ4_K*>(blocks);
    AffineSuperBlock sb;
    for (std::int64_t b = 0; b < n / QK_K; ++b, in += QK_K, w = w ? w + QK_K : nullptr) {
        quantize_affine_super_block(in, w, 32, 15, 63, sb);
        store_f16(y[b].d, sb.d.bits);
        store_f16(y[b].dmin, sb.dmin.bits);
        pack_scale_min_k4(sb.sc, sb.m, y[b].scales);
        pack_four_bits_k(sb.q, y[b].qs);
    }
}

void quantize_row_q5_k(const float* in, void* blocks, std::int64_t n) {
    quantize_row_q5_k_weighted(in, blocks, n, nullptr);
}

void quantize_row_q5_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ5_K*>(blocks);
    AffineSuperBlock sb;
    for (std::int64_t b = 0; b < n / QK_K; ++b, in += QK_K, w = w ? w + QK_K : nullptr) {
        quantize_affine_super_block(in, w, 32, 31, 63, sb);
        store_f16(y[b].d, sb.d.bits);
        store_f16(y[b].dmin, sb.dmin.bits);
        pack_scale_min_k4(sb.sc, sb.m, y[b].scales);
        pack_four_bits_k(sb.q, y[b].qs);
        pack_high_bit(sb.q, 4, y[b].qh);
    }
}

void quantize_row_q6_k(const float* in, void* blocks, std::int64_t n) {
    quantize_row_q6_k_weighted(in, blocks, n, nullptr);
}

void quantize_row_q6_k_weighted(const float* in, void* blocks, std::int64_t n, const float* w) {
    auto* y = static_cast<BlockQ6_K*>(blocks);
    SymmetricSuperBlock sb;
    for (std::int64_t b = 0; b < n / QK_K; ++b, in += QK_K, w = w ? w + QK_K : nullptr) {
        quantize_symmetric_super_block(in, w, 32, 31, 127, sb);
        store_f16(y[b].d, sb.d.bits);
        for (int s = 0; s < 16; ++s) y[b].scales[s] = static_cast<std::int8_t>(sb.sc[s]);
        // Stored code u = q + 32; with e = 128n + 32k + l the low nibble goes to
        // ql[64n + 32*(k%2) + l] (high nibble for k >= 2), the top 2 bits to qh[32n + l] at 2k.
        std::memset(y[b].ql, 0, sizeof y[b].ql);
        std::memset(y[b].qh, 0, sizeof y[b].qh);
        for (int e = 0; e < QK_K; ++e) {
            const int u = sb.q[e] + 32;
            const int half = e / 128;
            const int k = (e % 128) / 32;
            const int l = e % 32;
            y[b].ql[64 * half + 32 * (k % 2) + l] |=
                static_cast<std::uint8_t>((u & 0xF) << (4 * (k / 2)));
            y[b].qh[32 * half + l] |= static_cast<std::uint8_t>((u >> 4) << (2 * k));
        }
    }
}

}  // namespace tokenscope::tensor::detail
