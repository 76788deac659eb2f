// Scalar decoders of quantized weight blocks into the packed forms of matmul_internal.h. They
// serve the scalar kernels and every format that has no SIMD packer at a given level, so each
// format's bit layout is spelled out once here (the SIMD packers in dot_avx*.cpp must produce
// the same arrays; the tests check that all levels agree).
#include <cstddef>
#include <cstring>

#include "tensor/block_layouts.h"
#include "tensor/kquant_scales.h"
#include "tensor/matmul_internal.h"

namespace tokenscope::tensor::detail {

namespace {

std::uint32_t load_u32(const std::uint8_t (&b)[4]) {
    return static_cast<std::uint32_t>(b[0]) | (static_cast<std::uint32_t>(b[1]) << 8) |
           (static_cast<std::uint32_t>(b[2]) << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
}

// Element e of a Q4_0/Q4_1 block: low nibble of qs[e] for e < 16, high nibble of qs[e - 16].
void unpack_nibbles(const std::uint8_t* qs, std::uint8_t* u) {
    for (int e = 0; e < 16; ++e) {
        u[e] = static_cast<std::uint8_t>(qs[e] & 0xF);
        u[e + 16] = static_cast<std::uint8_t>(qs[e] >> 4);
    }
}

void add_fifth_bit(std::uint32_t qh, std::uint8_t* u) {
    for (int e = 0; e < 32; ++e) u[e] = static_cast<std::uint8_t>(u[e] | (((qh >> e) & 1u) << 4));
}

std::size_t k_block_bytes(Type type) {
    switch (type) {
        case Type::Q2_K:
            return sizeof(BlockQ2_K);
        case Type::Q3_K:
            return sizeof(BlockQ3_K);
        case Type::Q4_K:
            return sizeof(BlockQ4_K);
        case Type::Q5_K:
            return sizeof(BlockQ5_K);
        default:
            return sizeof(BlockQ6_K);
    }
}

void fill_sc16(std::int16_t* sc16, const std::int16_t (&sc)[16]) {
    for (int j = 0; j < 16; ++j) {
        for (int k = 0; k < 8; ++k) sc16[8 * j + k] = sc[j];
    }
}

}  // namespace

void pack_q32_row(Type type, const std::uint8_t* blocks, std::int64_t nblocks, std::uint8_t* u,
                  float* d, float* coef) {
    for (std::int64_t b = 0; b < nblocks; ++b, u += 32) {
        switch (type) {
            case Type::Q4_0: {
                const auto* blk = reinterpret_cast<const BlockQ4_0*>(blocks) + b;
                unpack_nibbles(blk->qs, u);
                d[b] = load_f16(blk->d);
                coef[b] = -8.0f * d[b];
                break;
            }
            case Type::Q4_1: {
                const auto* blk = reinterpret_cast<const BlockQ4_1*>(blocks) + b;
                unpack_nibbles(blk->qs, u);
                d[b] = load_f16(blk->d);
                coef[b] = load_f16(blk->m);
                break;
            }
            case Type::Q5_0: {
                const auto* blk = reinterpret_cast<const BlockQ5_0*>(blocks) + b;
                unpack_nibbles(blk->qs, u);
                add_fifth_bit(load_u32(blk->qh), u);
                d[b] = load_f16(blk->d);
                coef[b] = -16.0f * d[b];
                break;
            }
            case Type::Q5_1: {
                const auto* blk = reinterpret_cast<const BlockQ5_1*>(blocks) + b;
                unpack_nibbles(blk->qs, u);
                add_fifth_bit(load_u32(blk->qh), u);
                d[b] = load_f16(blk->d);
                coef[b] = load_f16(blk->m);
                break;
            }
            case Type::Q8_0: {
                const auto* blk = reinterpret_cast<const BlockQ8_0*>(blocks) + b;
                // q + 128 as an unsigned byte is q with its sign bit flipped.
                for (int e = 0; e < 32; ++e) {
                    u[e] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(blk->qs[e]) ^ 0x80u);
                }
                d[b] = load_f16(blk->d);
                coef[b] = -128.0f * d[b];
                break;
            }
            default:
                return;  // the dispatcher only sends 32-block types here
        }
    }
}

namespace {

// The scale half of pack_k_row for one super-block: *d, the 16 coef16 and the 16 sub-block
// scales (sc16 repeats each 8 times).
void k_block_scales(Type type, const std::uint8_t* block, std::int16_t (&sc)[16], float* d,
                    float* coef16) {
    switch (type) {
        case Type::Q2_K: {
            const auto* blk = reinterpret_cast<const BlockQ2_K*>(block);
            *d = load_f16(blk->d);
            const float dmin = load_f16(blk->dmin);
            for (int j = 0; j < 16; ++j) {
                sc[j] = static_cast<std::int16_t>(blk->scales[j] & 0xF);
                coef16[j] = -dmin * static_cast<float>(blk->scales[j] >> 4);
            }
            break;
        }
        case Type::Q3_K: {
            const auto* blk = reinterpret_cast<const BlockQ3_K*>(block);
            *d = load_f16(blk->d);
            for (int j = 0; j < 16; ++j) {
                sc[j] = static_cast<std::int16_t>(unpack_scale_q3_k(j, blk->scales));
                coef16[j] = -4.0f * *d * static_cast<float>(sc[j]);
            }
            break;
        }
        case Type::Q4_K:
        case Type::Q5_K: {
            // Same header in both: d, dmin, then the 12 bytes of 6-bit scales and mins.
            const auto* blk = reinterpret_cast<const BlockQ4_K*>(block);
            static_assert(offsetof(BlockQ4_K, scales) == offsetof(BlockQ5_K, scales));
            *d = load_f16(blk->d);
            const float dmin = load_f16(blk->dmin);
            for (int s = 0; s < 8; ++s) {
                const ScaleMin sm = unpack_scale_min_k4(s, blk->scales);
                sc[2 * s] = sc[2 * s + 1] = static_cast<std::int16_t>(sm.scale);
                coef16[2 * s] = coef16[2 * s + 1] = -dmin * static_cast<float>(sm.min);
            }
            break;
        }
        case Type::Q6_K: {
            const auto* blk = reinterpret_cast<const BlockQ6_K*>(block);
            *d = load_f16(blk->d);
            for (int j = 0; j < 16; ++j) {
                sc[j] = static_cast<std::int16_t>(static_cast<std::int8_t>(blk->scales[j]));
                coef16[j] = -32.0f * *d * static_cast<float>(sc[j]);
            }
            break;
        }
        default:
            return;  // the dispatcher only sends K-quant types here
    }
}

}  // namespace

void pack_k_row(Type type, const std::uint8_t* blocks, std::int64_t nblocks, std::uint8_t* u,
                std::int16_t* sc16, float* d, float* coef16) {
    const std::size_t block_bytes = k_block_bytes(type);
    for (std::int64_t b = 0; b < nblocks; ++b, u += QK_K, sc16 += QK_K / 2, coef16 += 16) {
        const std::uint8_t* block = blocks + static_cast<std::size_t>(b) * block_bytes;
        switch (type) {
            case Type::Q2_K: {
                const auto* blk = reinterpret_cast<const BlockQ2_K*>(block);
                for (int e = 0; e < QK_K; ++e) {
                    u[e] = static_cast<std::uint8_t>(
                        (blk->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
                }
                break;
            }
            case Type::Q3_K: {
                const auto* blk = reinterpret_cast<const BlockQ3_K*>(block);
                for (int e = 0; e < QK_K; ++e) {
                    const int low =
                        (blk->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                    const int high = (blk->hmask[e % 32] >> (e / 32)) & 1;
                    u[e] = static_cast<std::uint8_t>(low | (high << 2));  // q + 4
                }
                break;
            }
            case Type::Q4_K:
            case Type::Q5_K: {
                const std::uint8_t* qs = type == Type::Q4_K
                                             ? reinterpret_cast<const BlockQ4_K*>(block)->qs
                                             : reinterpret_cast<const BlockQ5_K*>(block)->qs;
                const std::uint8_t* qh =
                    type == Type::Q5_K ? reinterpret_cast<const BlockQ5_K*>(block)->qh : nullptr;
                for (int e = 0; e < QK_K; ++e) {
                    const int s = e / 32;
                    const std::uint8_t byte = qs[32 * (e / 64) + e % 32];
                    int q = (s % 2 == 0) ? (byte & 0xF) : (byte >> 4);
                    if (qh != nullptr) q |= ((qh[e % 32] >> s) & 1) << 4;
                    u[e] = static_cast<std::uint8_t>(q);
                }
                break;
            }
            case Type::Q6_K: {
                const auto* blk = reinterpret_cast<const BlockQ6_K*>(block);
                for (int e = 0; e < QK_K; ++e) {
                    const int n = e / 128, k = (e % 128) / 32, l = e % 32;
                    const std::uint8_t lbyte = blk->ql[64 * n + 32 * (k % 2) + l];
                    const int low = k < 2 ? (lbyte & 0xF) : (lbyte >> 4);
                    const int high = (blk->qh[32 * n + l] >> (2 * k)) & 3;
                    u[e] = static_cast<std::uint8_t>(low | (high << 4));  // q, value q - 32
                }
                break;
            }
            default:
                return;  // the dispatcher only sends K-quant types here
        }
        std::int16_t sc[16] = {};
        k_block_scales(type, block, sc, d + b, coef16);
        fill_sc16(sc16, sc);
    }
}

}  // namespace tokenscope::tensor::detail
