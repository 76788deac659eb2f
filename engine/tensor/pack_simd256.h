#pragma once
// SIMD packers (AVX2 + F16C, 256-bit) for the formats the default models use, producing
// exactly the arrays of the scalar pack_q32_row / pack_k_row (matmul_internal.h). Included by
// dot_avx2.cpp and dot_avx512.cpp; in an unnamed namespace so each gets its own copy compiled
// for its instruction set. Formats without a SIMD packer fall back to the scalar one.
//
// For one token the packers run once per weight block used once, so they are on the
// bandwidth-bound path and must cost a few instructions per 32 weights, not a few per weight.
#include <immintrin.h>

#include <cstddef>
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

// The sum of the 8 lanes.
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
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
// the high nibble of byte e - 16 (the Q4_0 / Q5_0 order). A broadcast load shifted by 4 in its
// upper half only (vpsrlvq) and one mask: three instructions where shifting, masking twice and
// inserting took five (the decode kernels run this for every block).
inline __m256i split_nibbles16(const std::uint8_t* qs) {
    const __m256i both =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return _mm256_and_si256(_mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4)),
                            _mm256_set1_epi8(0x0F));
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
[[maybe_unused]] void pack_q32_simd(Type type, const std::uint8_t* blocks, std::int64_t nb,
                                    std::uint8_t* u, float* d, float* c) {
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

// The int16 scales of 32-element chunk c (elements 32c..32c+31) from the 16 sub-block scales
// of a 16-sub-block K-quant: sub-block 2c in the low 128 bits, 2c + 1 in the high (the pairs
// pmaddubsw makes of elements 0-15 and 16-31).
inline __m256i chunk_scales16(__m256i scales16, int c) {
    const __m128i half =
        c < 4 ? _mm256_castsi256_si128(scales16) : _mm256_extracti128_si256(scales16, 1);
    const __m256i both = _mm256_broadcastsi128_si256(half);
    const int k = c % 4;
    // Lane 0: scale 2k (bytes 4k, 4k+1), lane 1: scale 2k+1.
    const short lo = static_cast<short>(((4 * k + 1) << 8) | (4 * k));
    const short hi = static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2));
    return _mm256_shuffle_epi8(both, _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi)));
}

// sc16 for one scale per 16 elements (Q6_K, Q3_K, Q2_K): 16 int16 scales in v.
inline void fill_sc16_per16(std::int16_t* sc16, __m256i scales16) {
    for (int c = 0; c < 8; ++c) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc16 + 16 * c), chunk_scales16(scales16, c));
    }
}

// Q4_K / Q5_K sub-block scales and mins (shared by the direct kernels and the int8 GEMMs'
// packer, pack_q4_k_scales; the byte-wise form is scale_min_k4 in kquant_scales.h).
// The 12 scale bytes (layout: tensor/kquant_scales.h) are unpacked as three little-endian
// words: sc[0..3] and m[0..3] are the low 6 bits of bytes 0-3 and 4-7; sc[4..7] and m[4..7]
// take their low 4 bits from the nibbles of bytes 8-11 and their top 2 bits from bits 6-7 of
// bytes 0-3 and 4-7. Four byte-parallel word operations give all sixteen at once, returned
// in two general registers so that no stack copy sits between them and the vector unit.
struct Q4KScalesMins {
    std::uint64_t sc;  // sc[s] in byte s
    std::uint64_t m;   // m[s] in byte s
};

inline Q4KScalesMins q4_k_scales_mins_words(const std::uint8_t* scales) {
    const std::uint32_t w[3] = {load_le32(scales), load_le32(scales + 4), load_le32(scales + 8)};
    constexpr std::uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
    const std::uint32_t sc_lo = w[0] & kLow6;
    const std::uint32_t m_lo = w[1] & kLow6;
    const std::uint32_t sc_hi = (w[2] & kLow4) | (((w[0] >> 6) & kLow2) << 4);
    const std::uint32_t m_hi = ((w[2] >> 4) & kLow4) | (((w[1] >> 6) & kLow2) << 4);
    return {sc_lo | std::uint64_t{sc_hi} << 32, m_lo | std::uint64_t{m_hi} << 32};
}

// Bit `bit` of each byte of v moved to bit `to` (other bits 0): one 16-bit shift by the
// difference, then the mask of bit `to` (two operations where shifting down, masking and
// shifting up took three; Q3_K decode does it once per 32 elements). The shift brings bit `bit`
// of each byte to bit `to` of the same byte; what crosses a byte boundary lands elsewhere and
// is masked off.
inline __m256i bit_to(__m256i v, int bit, int to) {
    const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << to));
    const __m256i moved = bit >= to ? _mm256_srl_epi16(v, _mm_cvtsi32_si128(bit - to))
                                    : _mm256_sll_epi16(v, _mm_cvtsi32_si128(to - bit));
    return _mm256_and_si256(moved, mask);
}

// The K-quants with 16 sub-blocks of 16 (Q6_K, Q3_K, Q2_K), decoded in registers; shared by
// their packer below and their direct kernels (dot_avx2.cpp). In pack_k_row's terms:
// sc16 the 16 sub-block scales, coef[j] the offset or min term of sub-block j (coef[0]: j < 8),
// and chunk c (elements 128n + 32k + l, c = 4n + k) the unsigned element bytes u.
struct K16Scales {
    __m256i sc16;
    __m256 coef[2];
    float d;
};

inline void k16_coef_from(__m256i v16, float k, __m256 (&coef)[2]) {
    const __m256 kv = _mm256_set1_ps(k);
    coef[0] =
        _mm256_mul_ps(kv, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(v16))));
    coef[1] = _mm256_mul_ps(
        kv, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(v16, 1))));
}

// Always inlined: left to GCC, the Q3_K form (scalar unpacking of its 12 scale bytes) stayed a
// call, with a vzeroupper and its result returned through the stack, in every super-block of
// the decode kernels: Q3_K decode ran at half Q2_K's cycles per byte (llvm-mca, Zen 3).
template <Type W>
[[gnu::always_inline]] inline K16Scales k16_scales(const std::uint8_t* blk) {
    K16Scales s;
    if constexpr (W == Type::Q6_K) {
        const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
        s.d = half_to_float(b->d);
        s.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
        k16_coef_from(s.sc16, -32.0f * s.d, s.coef);
    } else if constexpr (W == Type::Q3_K) {
        // unpack_scale_q3_k for all 16 at once, four per 32-bit word: the low nibbles of
        // scales[0..7] give s < 8, their high nibbles s >= 8; bits 2(s/4)..2(s/4)+1 of
        // scales[8 + s % 4] are bits 4-5.
        const auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
        s.d = half_to_float(b->d);
        const std::uint32_t w0 = load_le32(b->scales), w1 = load_le32(b->scales + 4);
        const std::uint32_t w2 = load_le32(b->scales + 8);
        constexpr std::uint32_t kLow4 = 0x0F0F0F0Fu, kLow2 = 0x03030303u;
        const __m128i u8 =
            _mm_setr_epi32(static_cast<int>((w0 & kLow4) | ((w2 & kLow2) << 4)),
                           static_cast<int>((w1 & kLow4) | (((w2 >> 2) & kLow2) << 4)),
                           static_cast<int>(((w0 >> 4) & kLow4) | (((w2 >> 4) & kLow2) << 4)),
                           static_cast<int>(((w1 >> 4) & kLow4) | (((w2 >> 6) & kLow2) << 4)));
        s.sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(u8), _mm256_set1_epi16(32));
        k16_coef_from(s.sc16, -4.0f * s.d, s.coef);
    } else {
        static_assert(W == Type::Q2_K);
        const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
        s.d = half_to_float(b->d);
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
        const __m128i low4 = _mm_set1_epi8(0x0F);
        s.sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, low4));
        k16_coef_from(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), low4)),
                      -half_to_float(b->dmin), s.coef);
    }
    return s;
}

template <Type W>
[[gnu::always_inline]] inline __m256i k16_chunk(const std::uint8_t* blk, int c) {
    const int n = c / 4, k = c % 4;
    const __m256i three = _mm256_set1_epi8(3);
    if constexpr (W == Type::Q6_K) {
        // Low 4 bits: low (k < 2) or high nibble of ql[64n + 32(k%2) + l]; high 2 bits: bits
        // 2k..2k+1 of qh[32n + l]. u = q, the value q - 32.
        const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
        const __m256i l =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * n + 32 * (k % 2)));
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * n));
        const __m256i low4 = _mm256_set1_epi8(0x0F);
        const __m256i low =
            k < 2 ? _mm256_and_si256(l, low4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), low4);
        const __m256i high = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * k)), three);
        return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
    } else {
        // Bits 2k..2k+1 of qs[32n + l]; Q3_K adds 4 where bit c of hmask[l] is set (u = q + 4).
        const std::uint8_t* qs = W == Type::Q3_K ? reinterpret_cast<const BlockQ3_K*>(blk)->qs
                                                 : reinterpret_cast<const BlockQ2_K*>(blk)->qs;
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * n));
        const __m256i low = _mm256_and_si256(_mm256_srl_epi16(x, _mm_cvtsi32_si128(2 * k)), three);
        if constexpr (W == Type::Q3_K) {
            const __m256i hm = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(reinterpret_cast<const BlockQ3_K*>(blk)->hmask));
            return _mm256_or_si256(low, bit_to(hm, c, 2));
        } else {
            return low;
        }
    }
}

template <Type W>
void pack_k16(const std::uint8_t* blocks, std::int64_t nb, std::size_t block_bytes, std::uint8_t* u,
              std::int16_t* sc16, float* d, float* c) {
    for (std::int64_t b = 0; b < nb; ++b, u += 256, sc16 += 128, c += 16) {
        const std::uint8_t* blk = blocks + static_cast<std::size_t>(b) * block_bytes;
        for (int ch = 0; ch < 8; ++ch) store32(u + 32 * ch, k16_chunk<W>(blk, ch));
        const K16Scales s = k16_scales<W>(blk);
        d[b] = s.d;
        fill_sc16_per16(sc16, s.sc16);
        _mm256_storeu_ps(c, s.coef[0]);
        _mm256_storeu_ps(c + 8, s.coef[1]);
    }
}

// Q4_K / Q5_K (the same header: d, dmin, 12 bytes of 6-bit scales and mins): d, sc16 and coef.
inline void pack_q4_k_scales(const BlockQ4_K* blk, std::int16_t* sc16, float* d, float* c) {
    static_assert(offsetof(BlockQ4_K, scales) == offsetof(BlockQ5_K, scales) &&
                  offsetof(BlockQ4_K, dmin) == offsetof(BlockQ5_K, dmin));
    *d = half_to_float(blk->d);
    const float dmin = half_to_float(blk->dmin);
    const Q4KScalesMins sm = q4_k_scales_mins_words(blk->scales);
    fill_sc16_per32(sc16, _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sm.sc))));
    // coef of each 16: -dmin * m of its 32-element sub-block, so each min twice.
    const __m256 mins = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sm.m)))),
        _mm256_set1_ps(-dmin));
    _mm256_storeu_ps(c, _mm256_permutevar8x32_ps(mins, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)));
    _mm256_storeu_ps(c + 8,
                     _mm256_permutevar8x32_ps(mins, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)));
}

[[maybe_unused]] void pack_k_simd(Type type, const std::uint8_t* blocks, std::int64_t nb,
                                  std::uint8_t* u, std::int16_t* sc16, float* d, float* c) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    switch (type) {
        case Type::Q4_K:
        case Type::Q5_K: {
            // 32 bytes of qs hold sub-block 2g (low nibbles) and 2g+1 (high nibbles); Q5_K adds
            // bit s of qh[l] as bit 4 of element 32s + l.
            const bool fifth = type == Type::Q5_K;
            const std::size_t block_bytes = fifth ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
            for (std::int64_t b = 0; b < nb; ++b, u += 256, sc16 += 128, c += 16) {
                const std::uint8_t* blk = blocks + static_cast<std::size_t>(b) * block_bytes;
                const std::uint8_t* qs = fifth ? reinterpret_cast<const BlockQ5_K*>(blk)->qs
                                               : reinterpret_cast<const BlockQ4_K*>(blk)->qs;
                const __m256i h = fifth ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                              reinterpret_cast<const BlockQ5_K*>(blk)->qh))
                                        : _mm256_setzero_si256();
                for (int g = 0; g < 4; ++g) {
                    const __m256i x =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * g));
                    store32(u + 64 * g,
                            _mm256_or_si256(_mm256_and_si256(x, low4), bit_to(h, 2 * g, 4)));
                    store32(u + 64 * g + 32,
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), low4),
                                            bit_to(h, 2 * g + 1, 4)));
                }
                pack_q4_k_scales(reinterpret_cast<const BlockQ4_K*>(blk), sc16, d + b, c);
            }
            return;
        }
        case Type::Q6_K:
            pack_k16<Type::Q6_K>(blocks, nb, sizeof(BlockQ6_K), u, sc16, d, c);
            return;
        case Type::Q3_K:
            pack_k16<Type::Q3_K>(blocks, nb, sizeof(BlockQ3_K), u, sc16, d, c);
            return;
        case Type::Q2_K:
            pack_k16<Type::Q2_K>(blocks, nb, sizeof(BlockQ2_K), u, sc16, d, c);
            return;
        default:
            pack_k_row(type, blocks, nb, u, sc16, d, c);
            return;
    }
}

}  // namespace
}  // namespace tokenscope::tensor::detail
