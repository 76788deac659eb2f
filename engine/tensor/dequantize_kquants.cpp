// Dequantization of the 256-element K-quant super-blocks Q2_K .. Q6_K. The loops walk the
// blocks in storage order (see block_layouts.h for where element e lives); the arithmetic is
// done in ggml's order (d * sub-scale first, then * q, then - dmin * min) so results match
// llama.cpp's CPU path bit for bit.
#include "tensor/block_layouts.h"
#include "tensor/kquant_scales.h"
#include "tensor/row_kernels.h"

namespace tokenscope::tensor::detail {

void dequantize_row_q2_k(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ2_K*>(blocks);
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const float d = load_f16(x[b].d);
        const float dmin = load_f16(x[b].dmin);
        const std::uint8_t* q = x[b].qs;
        int s = 0;  // sub-block of 16, advances in element order
        // Each 128-element half uses 32 bytes of qs; each byte holds 4 elements 32 apart.
        for (int half = 0; half < QK_K / 128; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part, ++s) {
                    const float dl = d * static_cast<float>(x[b].scales[s] & 0xF);
                    const float ml = dmin * static_cast<float>(x[b].scales[s] >> 4);
                    for (int l = 0; l < 16; ++l) {
                        *out++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
                    }
                }
            }
        }
    }
}

void dequantize_row_q3_k(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ3_K*>(blocks);
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const float d = load_f16(x[b].d);
        const std::uint8_t* q = x[b].qs;
        const std::uint8_t* hm = x[b].hmask;
        int s = 0;
        unsigned mask = 1;  // hmask bit for the current group of 32 elements
        for (int half = 0; half < QK_K / 128; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
                for (int part = 0; part < 2; ++part, ++s) {
                    const float dl = d * static_cast<float>(unpack_scale_q3_k(s, x[b].scales));
                    for (int l = 16 * part; l < 16 * part + 16; ++l) {
                        const int low = (q[l] >> shift) & 3;
                        const int value = low - ((hm[l] & mask) != 0 ? 0 : 4);
                        *out++ = dl * static_cast<float>(value);
                    }
                }
            }
        }
    }
}

void dequantize_row_q4_k(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ4_K*>(blocks);
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const float d = load_f16(x[b].d);
        const float dmin = load_f16(x[b].dmin);
        const std::uint8_t* q = x[b].qs;
        // Each 32 bytes of qs hold two sub-blocks: low nibbles, then high nibbles.
        for (int s = 0; s < 8; s += 2, q += 32) {
            const ScaleMin lo = unpack_scale_min_k4(s, x[b].scales);
            const ScaleMin hi = unpack_scale_min_k4(s + 1, x[b].scales);
            const float d1 = d * static_cast<float>(lo.scale);
            const float m1 = dmin * static_cast<float>(lo.min);
            const float d2 = d * static_cast<float>(hi.scale);
            const float m2 = dmin * static_cast<float>(hi.min);
            for (int l = 0; l < 32; ++l) *out++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *out++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        }
    }
}

void dequantize_row_q5_k(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ5_K*>(blocks);
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const float d = load_f16(x[b].d);
        const float dmin = load_f16(x[b].dmin);
        const std::uint8_t* q = x[b].qs;
        const std::uint8_t* qh = x[b].qh;
        for (int s = 0; s < 8; s += 2, q += 32) {
            const ScaleMin lo = unpack_scale_min_k4(s, x[b].scales);
            const ScaleMin hi = unpack_scale_min_k4(s + 1, x[b].scales);
            const float d1 = d * static_cast<float>(lo.scale);
            const float m1 = dmin * static_cast<float>(lo.min);
            const float d2 = d * static_cast<float>(hi.scale);
            const float m2 = dmin * static_cast<float>(hi.min);
            // Bit s of qh[l] is the fifth bit of element l of sub-block s.
            const unsigned bit_lo = 1u << s;
            const unsigned bit_hi = 1u << (s + 1);
            for (int l = 0; l < 32; ++l) {
                const int v = (q[l] & 0xF) + ((qh[l] & bit_lo) != 0 ? 16 : 0);
                *out++ = d1 * static_cast<float>(v) - m1;
            }
            for (int l = 0; l < 32; ++l) {
                const int v = (q[l] >> 4) + ((qh[l] & bit_hi) != 0 ? 16 : 0);
                *out++ = d2 * static_cast<float>(v) - m2;
            }
        }
    }
}

void dequantize_row_q6_k(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ6_K*>(blocks);
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const float d = load_f16(x[b].d);
        const std::uint8_t* ql = x[b].ql;
        const std::uint8_t* qh = x[b].qh;
        const std::int8_t* sc = x[b].scales;
        // Each 128-element half: 64 bytes of ql, 32 of qh, 8 scales. Byte l of qh carries the
        // high bits of elements l, l+32, l+64, l+96.
        for (int half = 0; half < QK_K / 128; ++half, ql += 64, qh += 32, sc += 8, out += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
                out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

}  // namespace tokenscope::tensor::detail
