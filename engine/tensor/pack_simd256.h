#pragma once
// SIMD packers (AVX2 + F16C, 256-bit) for the formats the default models use, producing
// exactly the arrays of the scalar pack_q32_row / pack_k_row (matmul_internal.h). Included by
// dot_avx2.cpp and dot_avx512.cpp; in an unnamed namespace so each gets its own copy compiled
// for its instruction set. Formats without a SIMD packer fall back to the scalar one.
//
// For one token the packers run once per weight block used once, so they are on the
// bandwidth-bound path and must cost a few instructions per 32 weights, not a few per weight.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/block_layouts.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {
namespace {

// Own copies instead of load_f16() and the like: those are inline functions of shared
// headers, and an out-of-line copy compiled here could replace the baseline one.
inline float half_to_float(const std::uint8_t* p) {
    return _cvtsh_ss(static_cast<unsigned short>(p[0] | (p[1] << 8)));
}

inline std::uint32_t load_le32(const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Bit e of `bits` -> 0x10 in byte e (the fifth bit of Q5_0/Q5_1 element e).
inline __m256i fifth_bits(std::uint32_t bits) {
    // Byte e takes byte e/8 of the word, keeps bit e%8 of it, and turns a set bit into 0x10.
    const __m256i word = _mm256_set1_epi32(static_cast<int>(bits));
    const __m256i spread =
        _mm256_shuffle_epi8(word, _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                                     0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// 16 bytes of nibbles -> 32 bytes: element e < 16 from the low nibble of byte e, e >= 16 from
// the high nibble of byte e - 16 (the Q4_0 / Q5_0 order).
inline __m256i split_nibbles16(const std::uint8_t* qs) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(x, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), mask);
    return _mm256_set_m128i(hi, lo);
}

inline void store32(std::uint8_t* p, __m256i v) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(p), v);  // packed buffers are 64-aligned
}

inline std::uint16_t load_half_bits(const std::uint8_t* p) {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return h;
}

// The block loop only gathers the f16 scale bits; they are converted 8 at a time afterwards,
// because a scalar f16 -> f32 conversion per block cost as much as the whole block's dot.
// nb <= kPackChunk / 32 (run_q32's chunking); d and c have room for nb rounded up to 16.
void pack_q32_simd(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                   float* d, float* c) {
    constexpr std::int64_t kMaxBlocks = kPackChunk / 32;
    alignas(32) std::uint16_t dh[kMaxBlocks + 8] = {};
    alignas(32) std::uint16_t mh[kMaxBlocks + 8] = {};
    float offset = 0.0f;  // coef = -offset * d, or the min m when offset is 0
    switch (type) {
        case Type::Q8_0: {
            const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
            for (std::int64_t b = 0; b < nb; ++b) {
                const std::uint8_t* blk = blocks + b * sizeof(BlockQ8_0);
                const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
                store32(u + 32 * b, _mm256_xor_si256(q, flip));
                dh[b] = load_half_bits(blk);
            }
            offset = 128.0f;
            break;
        }
        case Type::Q4_0:
            for (std::int64_t b = 0; b < nb; ++b) {
                const std::uint8_t* blk = blocks + b * sizeof(BlockQ4_0);
                store32(u + 32 * b, split_nibbles16(blk + 2));
                dh[b] = load_half_bits(blk);
            }
            offset = 8.0f;
            break;
        case Type::Q4_1:
            for (std::int64_t b = 0; b < nb; ++b) {
                const std::uint8_t* blk = blocks + b * sizeof(BlockQ4_1);
                store32(u + 32 * b, split_nibbles16(blk + 4));
                dh[b] = load_half_bits(blk);
                mh[b] = load_half_bits(blk + 2);
            }
            break;
        case Type::Q5_0:
            for (std::int64_t b = 0; b < nb; ++b) {
                const std::uint8_t* blk = blocks + b * sizeof(BlockQ5_0);
                store32(u + 32 * b,
                        _mm256_or_si256(split_nibbles16(blk + 6), fifth_bits(load_le32(blk + 2))));
                dh[b] = load_half_bits(blk);
            }
            offset = 16.0f;
            break;
        case Type::Q5_1:
            for (std::int64_t b = 0; b < nb; ++b) {
                const std::uint8_t* blk = blocks + b * sizeof(BlockQ5_1);
                store32(u + 32 * b,
                        _mm256_or_si256(split_nibbles16(blk + 8), fifth_bits(load_le32(blk + 4))));
                dh[b] = load_half_bits(blk);
                mh[b] = load_half_bits(blk + 2);
            }
            break;
        default:
            pack_q32_row(type, blocks, nb, u, d, c);
            return;
    }
    const __m256 neg_offset = _mm256_set1_ps(-offset);
    for (std::int64_t b = 0; b < nb; b += 8) {
        const __m256 dv = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh + b)));
        _mm256_storeu_ps(d + b, dv);
        const __m256 cv =
            offset != 0.0f
                ? _mm256_mul_ps(dv, neg_offset)
                : _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(mh + b)));
        _mm256_storeu_ps(c + b, cv);
    }
}

// sc16 for 16-element groups from `count` int16 scales in the low 128 bits of v (count 8:
// one scale per 32 elements, written 16 times; Q4_K) -- see pack_k_row for the layout. Each
// 32-byte store is one pshufb of the scales repeated in both lanes, where building every
// group with set1 took a GPR move and a broadcast per group.
inline void fill_sc16_per32(std::int16_t* sc16, __m128i scales8) {
    const __m256i both = _mm256_broadcastsi128_si256(scales8);
    for (int s = 0; s < 8; ++s) {
        const __m256i pick = _mm256_set1_epi16(static_cast<short>(((2 * s + 1) << 8) | (2 * s)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc16 + 16 * s),
                           _mm256_shuffle_epi8(both, pick));
    }
}

// The same for one scale per 16 elements (Q6_K): 16 int16 scales in v.
inline void fill_sc16_per16(std::int16_t* sc16, __m256i scales16) {
    for (int half = 0; half < 2; ++half) {
        const __m128i part =
            half == 0 ? _mm256_castsi256_si128(scales16) : _mm256_extracti128_si256(scales16, 1);
        const __m256i both = _mm256_broadcastsi128_si256(part);
        for (int k = 0; k < 4; ++k) {
            // Lane 0: scale 2k (bytes 4k, 4k+1), lane 1: scale 2k+1.
            const short lo = static_cast<short>(((4 * k + 1) << 8) | (4 * k));
            const short hi = static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2));
            const __m256i pick = _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi));
            _mm256_store_si256(reinterpret_cast<__m256i*>(sc16 + 64 * half + 16 * k),
                               _mm256_shuffle_epi8(both, pick));
        }
    }
}

// Bit `bit` of each byte of v moved to bit `to` (other bits 0). The 16-bit shifts move bits
// across the byte boundary only into positions the mask clears.
inline __m256i bit_to(__m256i v, int bit, int to) {
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i b = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(bit)), one);
    return _mm256_sll_epi16(b, _mm_cvtsi32_si128(to));
}

// The scalar scale unpacking of one super-block (16 values), spread with the SIMD fill.
inline void k_scales(Type type, const std::uint8_t* block, std::int16_t* sc16, float* d, float* c) {
    std::int16_t sc[16];
    k_block_scales(type, block, sc, d, c);
    fill_sc16_per16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc)));
}

// Q2_K / Q3_K low two bits: element 128n + 32k + l is bits 2k..2k+1 of qs[32n + l]. u must be
// 32-byte aligned (the packers' buffers are).
inline void unpack_2bit(const std::uint8_t* qs, std::uint8_t* u) {
    const __m256i three = _mm256_set1_epi8(3);
    for (int n = 0; n < 2; ++n) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * n));
        for (int k = 0; k < 4; ++k) {
            store32(u + 128 * n + 32 * k,
                    _mm256_and_si256(_mm256_srl_epi16(x, _mm_cvtsi32_si128(2 * k)), three));
        }
    }
}

void pack_k_simd(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                 std::int16_t* sc16, float* d, float* c) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    switch (type) {
        case Type::Q4_K:
            for (std::int64_t b = 0; b < nb; ++b, u += 256, sc16 += 128, c += 16) {
                const auto* blk = reinterpret_cast<const BlockQ4_K*>(blocks) + b;
                // 32 bytes of qs hold sub-block 2g (low nibbles) and 2g+1 (high nibbles).
                for (int g = 0; g < 4; ++g) {
                    const __m256i x =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * g));
                    store32(u + 64 * g, _mm256_and_si256(x, low4));
                    store32(u + 64 * g + 32, _mm256_and_si256(_mm256_srli_epi16(x, 4), low4));
                }
                d[b] = half_to_float(blk->d);
                const float dmin = half_to_float(blk->dmin);
                // The 8 6-bit scales and mins, 4 per 32-bit word at once (the byte-wise form
                // is scale_min_k4); per-byte shifts stay inside their byte thanks to the masks.
                const std::uint32_t w0 = load_le32(blk->scales);
                const std::uint32_t w1 = load_le32(blk->scales + 4);
                const std::uint32_t w2 = load_le32(blk->scales + 8);
                const std::uint64_t sc8 =
                    (w0 & 0x3F3F3F3Fu) | static_cast<std::uint64_t>(
                                             (w2 & 0x0F0F0F0Fu) | (((w0 >> 6) & 0x03030303u) << 4))
                                             << 32;
                const std::uint64_t m8 = (w1 & 0x3F3F3F3Fu) | static_cast<std::uint64_t>(
                                                                  ((w2 >> 4) & 0x0F0F0F0Fu) |
                                                                  (((w1 >> 6) & 0x03030303u) << 4))
                                                                  << 32;
                const __m128i sc8v = _mm_cvtsi64_si128(static_cast<long long>(sc8));
                fill_sc16_per32(sc16, _mm_cvtepu8_epi16(sc8v));
                // coef of each 16: -dmin * m of its 32-element sub-block, so each min twice.
                const __m256 mins = _mm256_mul_ps(
                    _mm256_cvtepi32_ps(
                        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(m8)))),
                    _mm256_set1_ps(-dmin));
                _mm256_storeu_ps(
                    c, _mm256_permutevar8x32_ps(mins, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)));
                _mm256_storeu_ps(c + 8, _mm256_permutevar8x32_ps(
                                            mins, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)));
            }
            return;
        case Type::Q6_K:
            for (std::int64_t b = 0; b < nb; ++b, u += 256, sc16 += 128, c += 16) {
                const auto* blk = reinterpret_cast<const BlockQ6_K*>(blocks) + b;
                const __m256i high2 = _mm256_set1_epi8(0x30);
                for (int half = 0; half < 2; ++half) {
                    const std::uint8_t* ql = blk->ql + 64 * half;
                    const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
                    const __m256i l1 =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
                    const __m256i h =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + 32 * half));
                    // Element 128*half + 32k + l: low nibble (k < 2) or high nibble (k >= 2) of
                    // ql[32*(k%2) + l], plus bits 2k..2k+1 of qh[l] moved to bits 4..5. The
                    // 16-bit shifts leak bits across bytes only outside the masked bits.
                    std::uint8_t* o = u + 128 * half;
                    store32(o, _mm256_or_si256(_mm256_and_si256(l0, low4),
                                               _mm256_and_si256(_mm256_slli_epi16(h, 4), high2)));
                    store32(o + 32,
                            _mm256_or_si256(_mm256_and_si256(l1, low4),
                                            _mm256_and_si256(_mm256_slli_epi16(h, 2), high2)));
                    store32(o + 64,
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                                            _mm256_and_si256(h, high2)));
                    store32(o + 96,
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                            _mm256_and_si256(_mm256_srli_epi16(h, 2), high2)));
                }
                d[b] = half_to_float(blk->d);
                const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales));
                fill_sc16_per16(sc16, _mm256_cvtepi8_epi16(sc));
                const __m256 coef = _mm256_set1_ps(-32.0f * d[b]);
                _mm256_storeu_ps(c,
                                 _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), coef));
                _mm256_storeu_ps(
                    c + 8,
                    _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))),
                                  coef));
            }
            return;
        case Type::Q5_K:
            for (std::int64_t b = 0; b < nb; ++b, u += 256, sc16 += 128, c += 16) {
                const auto* blk = reinterpret_cast<const BlockQ5_K*>(blocks) + b;
                // As Q4_K, plus bit s of qh[l] as bit 4 of element 32s + l (sub-block s).
                const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh));
                for (int g = 0; g < 4; ++g) {
                    const __m256i x =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * g));
                    store32(u + 64 * g,
                            _mm256_or_si256(_mm256_and_si256(x, low4), bit_to(h, 2 * g, 4)));
                    store32(u + 64 * g + 32,
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), low4),
                                            bit_to(h, 2 * g + 1, 4)));
                }
                k_scales(type, reinterpret_cast<const std::uint8_t*>(blk), sc16, d + b, c);
            }
            return;
        case Type::Q3_K:
            for (std::int64_t b = 0; b < nb; ++b, u += 256, sc16 += 128, c += 16) {
                const auto* blk = reinterpret_cast<const BlockQ3_K*>(blocks) + b;
                // Low 2 bits as Q2_K; bit (e / 32) of hmask[e % 32] adds 4 (q + 4, value - 4).
                unpack_2bit(blk->qs, u);
                const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->hmask));
                for (int j = 0; j < 8; ++j) {
                    std::uint8_t* o = u + 32 * j;
                    store32(o, _mm256_or_si256(
                                   _mm256_load_si256(reinterpret_cast<const __m256i*>(o)),
                                   bit_to(h, j, 2)));
                }
                k_scales(type, reinterpret_cast<const std::uint8_t*>(blk), sc16, d + b, c);
            }
            return;
        case Type::Q2_K:
            for (std::int64_t b = 0; b < nb; ++b, u += 256, sc16 += 128, c += 16) {
                const auto* blk = reinterpret_cast<const BlockQ2_K*>(blocks) + b;
                unpack_2bit(blk->qs, u);
                k_scales(type, reinterpret_cast<const std::uint8_t*>(blk), sc16, d + b, c);
            }
            return;
        default:
            pack_k_row(type, blocks, nb, u, sc16, d, c);
            return;
    }
}

}  // namespace
}  // namespace tokenscope::tensor::detail
