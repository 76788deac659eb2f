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

}  // namespace

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
