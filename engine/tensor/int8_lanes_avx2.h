#pragma once
// Pieces shared by the int8 prefill tiles whose 32-bit lanes are weight rows
// (gemm_int8_avx2.cpp for the K-quants, gemm_int8_q32_avx2.cpp for the 32-blocks,
// gemm_int8_avx512.cpp for the K-quants in 512-bit registers): weight rows are interleaved, 4
// bytes of each row side by side, and a token's 4 activation bytes are broadcast to every lane.
// AVX2 instructions only, in an unnamed namespace like pack_simd256.h, so each including file
// gets its own copy compiled for its instruction set (AVX2 or AVX-512).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/block_layouts.h"
#include "tensor/interleaved_rows.h"
#include "tensor/pack_simd256.h"
#include "tensor/scratch_buffer.h"

namespace tokenscope::tensor::detail {
namespace {

constexpr int kLanes = 8;  // weight rows per register

// GCC hoists every token's broadcast and product of a step ahead of the additions, and with 12
// accumulators live that leaves no registers: it kept 11 of them on the stack (measured in the
// generated code). An empty volatile asm on a value pins its place in the order, since volatile
// asms are never moved across each other, so each token's work stays together.
template <class V>  // __m256i, or __m512i in the AVX-512 tile
inline void keep_in_order(V& v) {
#if defined(__GNUC__)
    asm volatile("" : "+v"(v));  // any vector register (xmm/ymm/zmm 0-31 where they exist)
#else
    (void)v;
#endif
}

// out[j] = s16[2j] + s16[2j + 1] for j < 8: the activation sums of 32 elements from those of
// 16, for the K-quants whose offsets cover 32 (Q4_K, Q5_K). out is 32-byte aligned.
inline void sums_of_pairs16(const float* s16, float* out) {
    const __m256 sums = _mm256_hadd_ps(_mm256_loadu_ps(s16), _mm256_loadu_ps(s16 + 8));
    // hadd leaves [0+1, 2+3, 8+9, 10+11 | 4+5, 6+7, 12+13, 14+15].
    _mm256_store_ps(out, _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7)));
}

// A token's 4 activation bytes at p in every 32-bit lane of a V (__m256i, or __m512i in the
// AVX-512 tile; a template, so the AVX2 files never compile the 512-bit form).
template <class V>
inline V broadcast4(const std::uint8_t* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    if constexpr (sizeof(V) == 64) {
        return _mm512_set1_epi32(v);
    } else {
        return _mm256_set1_epi32(v);
    }
}

// An 8 x 8 transpose of 32-bit words: out[g] holds word g of r[0..7] in lanes 0..7.
inline void transpose_words8(const __m256i (&r)[8], __m256i (&out)[8]) {
    __m256i t[8], q[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        q[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        q[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        q[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        q[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; ++i) {
        out[i] = _mm256_permute2x128_si256(q[i], q[i + 4], 0x20);
        out[i + 4] = _mm256_permute2x128_si256(q[i], q[i + 4], 0x31);
    }
}

// Sixteen bytes of block i + 4k in 128-bit lane k (two lanes for 256-bit vectors, four for
// 512-bit): p points at block i's bytes, block_bytes apart. Four such vectors (i = 0..3) are what
// transpose_words4 takes.
template <typename V>
inline V blocks_in_lanes(const std::uint8_t* p, std::size_t block_bytes) {
    auto part = [&](int k) {
        return _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(p + static_cast<std::size_t>(4 * k) * block_bytes));
    };
    if constexpr (sizeof(V) == 64) {
        V v = _mm512_castsi128_si512(part(0));
        v = _mm512_inserti32x4(v, part(1), 1);
        v = _mm512_inserti32x4(v, part(2), 2);
        return _mm512_inserti32x4(v, part(3), 3);
    } else {
        return _mm256_set_m128i(part(1), part(0));
    }
}

// Sixteen bytes of each of four blocks in every 128-bit lane of r[i] (block i + 4k in lane k) ->
// word[j] holding 32-bit word j of those bytes for every block (block 4k + i in lane 4k + i): a
// 4 x 4 transpose of words within each 128-bit lane, for 256- or 512-bit vectors. The decode
// kernels that keep blocks in the integer lanes load blocks this way (nibble_words, and the
// AVX-512 Q8_0 GEMV in dot_avx512.cpp).
template <typename V>
inline void transpose_words4(const V (&r)[4], V (&word)[4]) {
    constexpr bool k512 = sizeof(V) == 64;
    auto unpack32 = [](V a, V b, bool high) {
        if constexpr (k512) {
            return high ? _mm512_unpackhi_epi32(a, b) : _mm512_unpacklo_epi32(a, b);
        } else {
            return high ? _mm256_unpackhi_epi32(a, b) : _mm256_unpacklo_epi32(a, b);
        }
    };
    auto unpack64 = [](V a, V b, bool high) {
        if constexpr (k512) {
            return high ? _mm512_unpackhi_epi64(a, b) : _mm512_unpacklo_epi64(a, b);
        } else {
            return high ? _mm256_unpackhi_epi64(a, b) : _mm256_unpacklo_epi64(a, b);
        }
    };
    const V t01[2] = {unpack32(r[0], r[1], false), unpack32(r[0], r[1], true)};
    const V t23[2] = {unpack32(r[2], r[3], false), unpack32(r[2], r[3], true)};
    for (int j = 0; j < 4; ++j) word[j] = unpack64(t01[j / 2], t23[j / 2], j % 2 == 1);
}

// The int32 sums, per 32-bit lane, of unsigned bytes w[v] times the signed activation bytes at
// x + 64 v (word v of a 16-block group in the activations' interleaved copy), v = 0..7: one
// block's 32 products per lane when the lanes are blocks. vpdpbusd in two chains of four, so
// that the adds do not all wait on one chain. 512-bit vectors only (AVX2 has no vpdpbusd).
template <typename V>
inline V dot_words8(const V (&w)[8], const std::uint8_t* x) {
    static_assert(sizeof(V) == 64, "vpdpbusd on 512-bit vectors");
    V even = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], _mm512_load_si512(x));
    V odd = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], _mm512_load_si512(x + 64));
    for (int v = 2; v < 8; v += 2) {
        even = _mm512_dpbusd_epi32(even, w[v], _mm512_load_si512(x + 64 * v));
        odd = _mm512_dpbusd_epi32(odd, w[v + 1], _mm512_load_si512(x + 64 * (v + 1)));
    }
    return _mm512_add_epi32(even, odd);
}

// The 16 nibble bytes of four Q4_0/Q4_1 blocks per 128-bit lane, as transpose_words4 takes them
// -> u[v] holding word v of every block as 4-bit codes: words 0-3 from the low nibbles (elements
// 4v..4v+3), 4-7 from the high ones (elements 16 + 4(v - 4)..). For the Q4_0/Q4_1 decode
// kernels with blocks in the integer lanes (dot_avx2.cpp, direct_avx512.cpp).
template <typename V>
inline void nibble_words(const V (&r)[4], V (&u)[8]) {
    V word[4];
    transpose_words4(r, word);
    for (int j = 0; j < 4; ++j) {
        if constexpr (sizeof(V) == 64) {
            const V low4 = _mm512_set1_epi8(0x0F);
            u[j] = _mm512_and_si512(word[j], low4);
            u[j + 4] = _mm512_and_si512(_mm512_srli_epi16(word[j], 4), low4);
        } else {
            const V low4 = _mm256_set1_epi8(0x0F);
            u[j] = _mm256_and_si256(word[j], low4);
            u[j + 4] = _mm256_and_si256(_mm256_srli_epi16(word[j], 4), low4);
        }
    }
}

// 32 bytes of each of 8 rows (src + r * stride, 32-byte aligned) -> 8 vectors at dst + g *
// dst_stride (32-byte aligned), vector g holding bytes 4g..4g+3 of rows 0..7 in lanes 0..7.
inline void interleave_rows32(const std::uint8_t* src, std::size_t stride, std::uint8_t* dst,
                              std::size_t dst_stride) {
    __m256i r[8], out[8];
    for (int i = 0; i < 8; ++i)
        r[i] = _mm256_load_si256(
            reinterpret_cast<const __m256i*>(src + static_cast<std::size_t>(i) * stride));
    transpose_words8(r, out);
    for (int g = 0; g < 8; ++g)
        _mm256_store_si256(
            reinterpret_cast<__m256i*>(dst + static_cast<std::size_t>(g) * dst_stride), out[g]);
}

// The float update of K-quant super-block b for a tile of H registers of rows x T tokens, run by
// both the K-quant lane GEMM (gemm_int8_avx2.cpp) and the interleaved tile
// (interleaved_kquant_avx2.cpp), so that the two give a token the same bits:
//   for each offset term j in order f = fma(coef_j, s_j, f), then f = fma(float(acc), d_r * d_t, f)
// with s the activation sums of 16 elements, or of 32 (kPairedOffsets: Q4_K and Q5_K keep one min
// per 32). d(h) gives the rows' d of register h, coef(j, h) their offset term j. The offset terms
// come first because they need only the scales: the Q2_K, Q3_K and Q6_K tiles issue them before
// the super-block's integer products, so their chain of FMAs (16 x 4 cycles at one token) runs
// beside the products instead of after them (AVX-512 decode tile, one thread in cache, Zen 4:
// Q2_K +19 %, Q3_K +12 %, Q6_K +9 %); Q4_K/Q5_K's eight terms are cheaper after the products.
// Always inlined: GCC left the update out of line in the lane GEMM's Q4_K/Q5_K tiles,
// which then ran at 1.65 cycles per (token, row, 32 elements) against 1.10 (64 tokens, one thread,
// Zen 3).
template <bool kPairedOffsets, int H, int T, class Acts, class Coef>
[[gnu::always_inline]] inline void kquant_offset_update(const Acts& acts, std::int64_t b,
                                                        const Coef& coef, __m256 (&f)[H][T]) {
    constexpr int kSums = kPairedOffsets ? 8 : 16;
    alignas(32) float pair_sums[kPairedOffsets ? T : 1][8];
    if constexpr (kPairedOffsets) {
        for (int t = 0; t < T; ++t) sums_of_pairs16(acts.s[t] + 16 * b, pair_sums[t]);
    }
    for (int h = 0; h < H; ++h) {
        // Tokens innermost: T independent chains of multiply-adds instead of one chain at a
        // time, which left the loop waiting on FMA latency (a fifth of the lane GEMM tile's
        // time, measured with perf).
        for (int j = 0; j < kSums; ++j) {
            const __m256 cj = coef(j, h);
            for (int t = 0; t < T; ++t) {
                const float* sum = kPairedOffsets ? &pair_sums[t][j] : acts.s[t] + 16 * b + j;
                f[h][t] = _mm256_fmadd_ps(cj, _mm256_broadcast_ss(sum), f[h][t]);
            }
        }
    }
}

// The second half of the update: the super-block's integer sums times d_r * d_t.
template <int H, int T, class Acts, class D>
[[gnu::always_inline]] inline void kquant_scale_update(const Acts& acts, std::int64_t b,
                                                       const __m256i (&acc)[H][T], const D& d,
                                                       __m256 (&f)[H][T]) {
    for (int h = 0; h < H; ++h) {
        const __m256 dw = d(h);
        for (int t = 0; t < T; ++t) {
            const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(acts.d[t] + b));
            f[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[h][t]), scale, f[h][t]);
        }
    }
}

// Interleaved Q4_K and Q5_K (interleaved_rows.h): 8 sub-blocks of 32 elements per super-block,
// each with a 6-bit scale and min.
inline constexpr int kQ4KSubBlocks = 8;

// vpshufb operands that take byte i (0-3) of each 32-bit lane, a row's packed scale or min, to
// the lane's bytes marked in `to` and zero the others (member of[i]).
struct LaneByteMasks {
    alignas(32) std::int8_t of[4][32];
};
consteval LaneByteMasks make_lane_byte_masks(bool to0, bool to1, bool to2, bool to3) {
    const bool to[4] = {to0, to1, to2, to3};
    LaneByteMasks m{};
    for (int i = 0; i < 4; ++i) {
        for (int lane = 0; lane < 8; ++lane) {
            for (int k = 0; k < 4; ++k)  // the byte's index within the 128-bit half
                m.of[i][4 * lane + k] = to[k] ? static_cast<std::int8_t>(4 * (lane % 4) + i) : -1;
        }
    }
    return m;
}

// Q4_K's unsigned 6-bit values: as two int16 (pmaddwd's operand) or as one int32.
inline constexpr LaneByteMasks kQ4KPairMasks = make_lane_byte_masks(true, false, true, false);
inline constexpr LaneByteMasks kQ4KSingleMasks = make_lane_byte_masks(true, false, false, false);

inline __m256i load_mask(const std::int8_t* m) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
}

// One super-block's scales of an interleaved Q4_K or Q5_K group (interleaved_rows.h), its 16
// rows unpacked for the integer tiles (interleaved_kquant_avx2.cpp, and pack_q4_k_interleaved
// below).
struct Q4KGroupScales {
    __m256i sc[kQ4KSubBlocks][2];   // sub-block s's scale as an int16 pair per lane
    __m256 coef[kQ4KSubBlocks][2];  // -dmin * m_s per lane
    __m256 d[2];
};

// The 12 bytes of a row (ggml's Q4_K scales): bytes 0-3 hold scales 0-3 (low 6 bits) and the
// top 2 bits of scales 4-7, bytes 4-7 the same for the mins, bytes 8-11 the low 4 bits of
// scales 4-7 (low nibble) and of mins 4-7 (high nibble). Words 0, 1, 2 of 8 rows per register.
template <Type W>  // Q4_K or Q5_K
inline void unpack_q4_k_group_scales(const std::uint8_t* block, Q4KGroupScales& out) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const __m256i six = _mm256_set1_epi8(0x3F);
    const __m256i four = _mm256_set1_epi8(0x0F);
    const __m256i top = _mm256_set1_epi8(0x30);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int h = 0; h < 2; ++h) {
        const std::uint8_t* sub = block + kLayout.sub_scales + h * 8 * kLayout.sub_scale_bytes;
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sub));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sub + 32));
        const __m256i w2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sub + 64));
        // Byte i of each lane: sub-block i (low) and 4 + i (high). A 32-bit shift moves the top
        // 2 bits of byte i to bits 4-5 of the same byte; the mask drops what crossed bytes.
        const __m256i scales[2] = {
            _mm256_and_si256(w0, six),
            _mm256_or_si256(_mm256_and_si256(w2, four),
                            _mm256_and_si256(_mm256_srli_epi32(w0, 2), top))};
        const __m256i mins[2] = {_mm256_and_si256(w1, six),
                                 _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), four),
                                                 _mm256_and_si256(_mm256_srli_epi32(w1, 2), top))};
        const __m256 neg_dmin = _mm256_xor_ps(
            sign, _mm256_cvtph_ps(_mm_loadu_si128(
                      reinterpret_cast<const __m128i*>(block + kLayout.mins + 16 * h))));
        out.d[h] = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kLayout.scales + 16 * h)));
        for (int s = 0; s < kQ4KSubBlocks; ++s) {
            out.sc[s][h] = _mm256_shuffle_epi8(scales[s / 4], load_mask(kQ4KPairMasks.of[s % 4]));
            out.coef[s][h] =
                _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_shuffle_epi8(
                                  mins[s / 4], load_mask(kQ4KSingleMasks.of[s % 4]))),
                              neg_dmin);
        }
    }
}

// 16 in each byte of `bit` that holds one of the bits 0-3 alone (1, 2, 4 or 8), 0 where it is 0:
// one table lookup (vpshufb), where a compare and a mask take two. Q5_0/Q5_1 and Q5_K make
// their fifth bits with it.
inline __m256i sixteen_where_low_bit_set(__m256i bit) {
    const __m256i table = _mm256_setr_epi8(0, 16, 16, 0, 16, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0,
                                           16, 16, 0, 16, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0);
    return _mm256_shuffle_epi8(table, bit);
}

// How q4_k_code_word makes Q5_K's fifth bit 16 from the bit kept alone by a mask (2^s):
// kCompare: a compare with the mask and an and; kLookup (s < 4): a table lookup (vpshufb), 16 at
// 1, 2, 4 and 8; kMinimum (s >= 4): an unsigned minimum with 16. The last two take one operation
// less, which pays where the arithmetic is light: one token, one thread, 1024 x 1024 in cache,
// Zen 3, cycles per (row, 32), best of 15, three alternated rounds: 4.27-4.39 -> 3.60-4.08, two
// tokens 2.61-2.87 -> 2.32-2.41. The tiles of 3 tokens and more keep the compare: they need the
// chunk loop split in two for the other forms, and with two copies of their long bodies 4 and 6
// tokens ran 2.56 / 2.55 against 1.83 / 1.66 (and Q4_K's, split alike, 1.57 / 2.03 against
// 1.38 / 1.34). The split loops need their chunk bounds at compile time: passed at run time,
// the one-token tile was no faster (4.33-4.56).
enum class FifthBit { kCompare, kLookup, kMinimum };

// Codes of 8 interleaved Q4_K or Q5_K rows, 4 elements each: the low (high = 0) or high (1)
// nibbles of stored code word w (0-31) of half h, elements 64 (w / 8) + 32 high + 4 (w % 8)..
// of sub-block s = 2 (w / 8) + high. Q5_K adds each element's fifth bit: bit s of qh byte
// 4 (w % 8).. (qh word w % 8), as 16 (FifthBit). Not by bit_to (pack_simd256.h): its shift, by
// a count known only at run time, made the 4- and 6-token tiles 1.92-1.96 cycles per (token,
// row, 32) against 1.65-1.80 with the compare.
template <Type W, FifthBit kFifth = FifthBit::kCompare>
inline __m256i q4_k_code_word(const std::uint8_t* block, int h, int w, int high) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        block + static_cast<std::size_t>(h) * kLayout.codes + 32 * static_cast<std::size_t>(w)));
    __m256i code = _mm256_and_si256(high ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
    if constexpr (W == Type::Q5_K) {
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
            block + kLayout.high_bits + static_cast<std::size_t>(h) * 8 * kLayout.high_bytes +
            32 * static_cast<std::size_t>(w % 8)));
        const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << (2 * (w / 8) + high)));
        const __m256i bit = _mm256_and_si256(qh, mask);
        const __m256i sixteen = _mm256_set1_epi8(0x10);
        if constexpr (kFifth == FifthBit::kCompare) {
            code = _mm256_or_si256(code, _mm256_and_si256(_mm256_cmpeq_epi8(bit, mask), sixteen));
        } else if constexpr (kFifth == FifthBit::kMinimum) {
            code = _mm256_or_si256(code, _mm256_min_epu8(bit, sixteen));
        } else {
            code = _mm256_or_si256(code, sixteen_where_low_bit_set(bit));
        }
    }
    return code;
}

// Interleaved Q2_K, Q3_K and Q6_K (interleaved_rows.h): 16 sub-blocks of 16 elements per
// super-block, each with a small integer scale.
inline constexpr int kK16SubBlocks = 16;

// A signed scale byte into the high byte of both int16 halves or into the top byte of the lane:
// an arithmetic shift then sign-extends it.
inline constexpr LaneByteMasks kK16PairMasks = make_lane_byte_masks(false, true, false, true);
inline constexpr LaneByteMasks kK16SingleMasks = make_lane_byte_masks(false, false, false, true);

// Q3_K's offset in the integers. Its codes are stored as q + 4 (u, 0..7, pmaddubsw's unsigned
// operand), so sum_j sc_j sum_k q_k x_k = sum_j sc_j (sum_k u_k x_k - 4 isum_j), isum_j the
// activations' integer sum of sub-block j, and PreparedActivations' offset16 holds -4 isum_j. Every
// Q3_K kernel (the AVX2 and AVX-512 decode tiles and lane GEMMs) adds it to each sub-block's
// products before the scale and has no float offset terms: 16 multiply-adds per super-block, row
// register and token fewer, with their chain of FMA latencies, which took a third of the AVX2
// decode tile's samples (one thread, 2816 x 1024 in cache, one token, median GB/s: AVX2 14.7 ->
// 16.4, AVX-512 21.6 -> 21.4 (best 22.3 -> 24.9); 128 tokens, lane GEMMs, +17 % and +15 %;
// docs/benchmarks.md, thirty-fifth pass). On AVX-512 the sub-block's int32 sum starts at -4 isum_j
// (a broadcast load). On AVX2 the products are two int16 pair sums per row lane, and the low one
// takes it (q3_k_offset_pairs, from offset16_low): what it holds then, sum_{its 8} q x - 4 sum_{the
// other 8} x, is at most 8 * 4 * 127 + 4 * 8 * 127 = 8128 in magnitude, within int16, so the
// wrapping addition gives it exactly, and pmaddwd then the sub-block's sum times its scale.
template <Type W>
inline constexpr bool kQ3KIntegerOffsets = W == Type::Q3_K;

// The AVX-512 32-block kernels (the lane GEMM, gemm_int8_q32_avx512.cpp, and the tile,
// interleaved_q32_avx512.cpp) put Q4_0's and Q5_0's offsets (8 and 16: their stored codes are
// q + 8, q + 16) into the integers: each block's sum starts at -offset times the activation
// block's integer sum (PreparedActivations' isum), giving sum q x exactly, and the float offset
// term (-offset d s_a, a multiply-add per row register and token) goes. 0 for the other types.
template <Type W>
inline constexpr int kQ32IntegerOffset = W == Type::Q4_0   ? 8
                                         : W == Type::Q5_0 ? 16
                                                           : 0;

// The AVX-512 K-quant kernels (the lane GEMM, gemm_int8_avx512.cpp, and the decode tile,
// interleaved_kquant_avx512.cpp) put Q6_K's offset into the integers too: its stored codes are
// q + 32, so each 16-element sum starts at -32 isum = 8 offset16 and becomes sum (u - 32) x, at
// most 16 * 32 * 127 in magnitude, which their 32-bit sums hold (AVX2's int16 pairs, where
// Q3_K's -4 isum goes, do not). Its 16 offset terms per super-block, each a float multiply-add
// per row register and token on the pipes vpdpbusd takes, then disappear. The factor on
// offset16 for each type, 0 where the offset stays a float term.
template <Type W>
inline constexpr int kAvx512OffsetFactor = W == Type::Q3_K   ? 1
                                           : W == Type::Q6_K ? 8
                                                             : 0;

// What a Q3_K sub-block's int16 pair sums gain on AVX2: -4 isum in the low int16 of each lane
// and 0 in the high one (its offset16_low entry, broadcast).
inline __m256i q3_k_offset_pairs(const std::int32_t* offset_low) {
    return _mm256_set1_epi32(*offset_low);
}

// Passed where a kernel's type has no integer offset (every type but Q3_K).
struct NoOffset {};
struct NoOffsets {
    NoOffset operator()(int) const { return {}; }
};

// One super-block's scales of an interleaved Q2_K, Q3_K or Q6_K group, its 16 rows unpacked as
// the K-quant lane GEMM's packer makes them (pack_k_row): sc as int16 pairs, coef the offset
// term of each sub-block (Q6_K: -32 d sc, Q3_K: -4 d sc, Q2_K: -dmin m), exact in float (an
// f16 times a small integer, times a power of two). Q3_K's kernels leave its coef unused (its
// offset is in the integers, kQ3KIntegerOffsets).
struct K16GroupScales {
    __m256i sc[kK16SubBlocks][2];
    __m256 coef[kK16SubBlocks][2];
    __m256 d[2];
};

// Word i (0-3) of 8 rows' sub-block scales as signed bytes, scales 4i..4i+3 in bytes 0-3 of a
// row's lane; for Q2_K `mins` gets the same word of the mins (unsigned, below 16).
// Q6_K: the stored int8 scales. Q2_K: low (scale) and high (min) nibbles of scales[4i..4i+3].
// Q3_K: its 12 bytes hold the low 4 bits of scales 0-7 (low nibbles of bytes 0-7) and 8-15
// (their high nibbles), and in bytes 8-11 the top 2 bits: bits 2m, 2m + 1 of byte 8 + s % 4
// for scale s = 4m + s % 4 (unpack_scale_q3_k, kquant_scales.h); the value is the 6 bits minus 32.
template <Type W>
inline __m256i k16_scale_word(const std::uint8_t* sub, int i, __m256i* mins) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const auto word = [&](int w) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sub + 32 * w));
    };
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    if constexpr (W == Type::Q6_K) {
        static_assert(kLayout.sub_scale_bytes == 16);
        return word(i);
    } else if constexpr (W == Type::Q2_K) {
        static_assert(kLayout.sub_scale_bytes == 16);
        const __m256i v = word(i);
        *mins = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        return _mm256_and_si256(v, low4);
    } else {
        static_assert(W == Type::Q3_K && kLayout.sub_scale_bytes == 12);
        const __m256i nibbles = word(i % 2);
        const __m256i low = _mm256_and_si256(i < 2 ? nibbles : _mm256_srli_epi16(nibbles, 4), low4);
        // Bits 2i, 2i + 1 of word 2 to bits 4, 5.
        const __m256i tops = word(2);
        const __m256i top = i == 0   ? _mm256_slli_epi16(tops, 4)
                            : i == 1 ? _mm256_slli_epi16(tops, 2)
                            : i == 2 ? tops
                                     : _mm256_srli_epi16(tops, 2);
        const __m256i six = _mm256_or_si256(low, _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
        return _mm256_sub_epi8(six, _mm256_set1_epi8(32));
    }
}

// offset(j, h, coef) receives offset term j of register h as it is made, in order of j within
// each h; the form without it stores the terms in out.coef.
template <Type W, class Offset>  // Q2_K, Q3_K or Q6_K
[[gnu::always_inline]] inline void unpack_k16_group_scales(const std::uint8_t* block,
                                                           K16GroupScales& out,
                                                           const Offset& offset) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    for (int h = 0; h < 2; ++h) {
        const __m256 d = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kLayout.scales + 16 * h)));
        out.d[h] = d;
        // What multiplies each sub-block's scale (Q6_K, Q3_K) or min (Q2_K) into its offset term.
        __m256 factor;
        if constexpr (W == Type::Q2_K) {
            factor = _mm256_xor_ps(_mm256_set1_ps(-0.0f),
                                   _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                       block + kLayout.mins + 16 * h))));
        } else {
            factor = _mm256_mul_ps(_mm256_set1_ps(W == Type::Q6_K ? -32.0f : -4.0f), d);
        }
        const std::uint8_t* sub = block + kLayout.sub_scales + h * 8 * kLayout.sub_scale_bytes;
        for (int i = 0; i < 4; ++i) {
            __m256i mins = _mm256_setzero_si256();
            const __m256i v = k16_scale_word<W>(sub, i, &mins);
            const __m256i terms = W == Type::Q2_K ? mins : v;
            for (int k = 0; k < 4; ++k) {
                const __m256i sc =
                    _mm256_srai_epi16(_mm256_shuffle_epi8(v, load_mask(kK16PairMasks.of[k])), 8);
                out.sc[4 * i + k][h] = sc;
                // Q6_K's and Q3_K's terms multiply the scale itself, which the pair's high half
                // already holds sign-extended: one shift instead of a shuffle and a shift.
                const __m256i term =
                    W == Type::Q2_K
                        ? _mm256_srai_epi32(
                              _mm256_shuffle_epi8(terms, load_mask(kK16SingleMasks.of[k])), 24)
                        : _mm256_srai_epi32(sc, 16);
                offset(4 * i + k, h, _mm256_mul_ps(_mm256_cvtepi32_ps(term), factor));
            }
        }
    }
}

template <Type W>
inline void unpack_k16_group_scales(const std::uint8_t* block, K16GroupScales& out) {
    unpack_k16_group_scales<W>(
        block, out, [&](int j, int h, __m256 coef) __attribute__((always_inline)) {
            out.coef[j][h] = coef;
        });
}

// Codes of 8 interleaved rows, 4 elements each: kind k (0-3) of word v (0-7) of half n (0-1) of
// the super-block, elements 128 n + 32 k + 4 v.. (ggml's order).
// Q6_K: ql's low nibbles of bytes 0-31 and 32-63, then their high nibbles, each with 2 bits of
// qh. Q2_K: bits 2k, 2k + 1 of qs byte 32 n + 4 v..; Q3_K adds bit 4 n + k of hmask byte 4 v..
// as 4 (the unsigned code q + 4).
template <Type W>
inline __m256i k16_code_word(const std::uint8_t* block, int h, int n, int k, int v) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const auto word_at = [&](std::size_t part, std::size_t row_bytes, int w) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
            block + part + static_cast<std::size_t>(h) * 8 * row_bytes +
            static_cast<std::size_t>(w) * 32));
    };
    if constexpr (W == Type::Q6_K) {
        const __m256i four = _mm256_set1_epi8(0x0F);
        const __m256i two = _mm256_set1_epi8(0x30);
        const __m256i low = word_at(0, kLayout.codes / 8, 16 * n + 8 * (k % 2) + v);
        const __m256i high = word_at(kLayout.high_bits, kLayout.high_bytes, 8 * n + v);
        const __m256i nibble = _mm256_and_si256(k < 2 ? low : _mm256_srli_epi16(low, 4), four);
        // Bits 2k, 2k + 1 of qh to bits 4, 5.
        const __m256i top = k == 0   ? _mm256_slli_epi16(high, 4)
                            : k == 1 ? _mm256_slli_epi16(high, 2)
                            : k == 2 ? high
                                     : _mm256_srli_epi16(high, 2);
        return _mm256_or_si256(nibble, _mm256_and_si256(top, two));
    } else {
        static_assert(W == Type::Q2_K || W == Type::Q3_K);
        const __m256i qs = word_at(0, kLayout.codes / 8, 8 * n + v);
        const __m256i low =
            _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
        if constexpr (W == Type::Q3_K) {
            const __m256i hm = word_at(kLayout.high_bits, kLayout.high_bytes, v);
            return _mm256_or_si256(low, bit_to(hm, 4 * n + k, 2));
        } else {
            return low;
        }
    }
}

// Vector j of 8 interleaved rows' nibble codes (Q4_0/Q4_1/Q5_0/Q5_1, interleaved_rows.h: bytes
// 4j..4j+3 of each row's 16 code bytes) as word j (the low nibbles, elements 4j..4j+3) and word
// j + 4 (the high ones, elements 16 + 4j..). kFifthBits (Q5_0/Q5_1) adds each element's fifth
// bit as 16, from `fifth`, the 8 rows' qh (one per lane): element e's is bit e, so after a shift
// by 4j byte 0 of the lane holds the low word's four in bits 0-3 and byte 2 the high word's;
// each is copied to the lane's 4 bytes, byte k keeps bit k (x & 0x08040201), and a table
// lookup turns a set bit into 16.
template <bool kFifthBits>
inline void interleaved_nibble_words(const std::uint8_t* codes, int j, __m256i fifth, __m256i& lo,
                                     __m256i& hi) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i v = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(codes + 32 * static_cast<std::size_t>(j)));
    lo = _mm256_and_si256(v, low4);
    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if constexpr (kFifthBits) {
        const __m256i byte0 = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                               0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
        const __m256i byte2 = _mm256_add_epi8(byte0, _mm256_set1_epi8(2));
        const __m256i bit_k = _mm256_set1_epi32(0x08040201);
        const __m256i bits = _mm256_srli_epi32(fifth, 4 * j);
        auto spread = [&](__m256i which) {
            const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(bits, which), bit_k);
            return sixteen_where_low_bit_set(b);
        };
        lo = _mm256_or_si256(lo, spread(byte0));
        hi = _mm256_or_si256(hi, spread(byte2));
    }
}

// The same words for 8 rows of a group of interleaved rows (a.interleaved: Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, interleaved_rows.h), where the codes are stored in this word order already (the nibble
// types hold words j and j + 4 in the low and high nibbles of one vector): `here` is 8, or 0 or
// less for rows past the end (zero lanes). r0 is a multiple of 8: the first or second half of the
// group that starts at the multiple of 16 below it.
template <class Emit>
void interleaved_words_of_8_rows(const MatmulArgs& a, std::int64_t r0, int here, Emit&& emit) {
    const auto n = static_cast<std::size_t>(a.n / 32);
    if (here <= 0) {
        const __m256i zero[8] = {};
        for (std::size_t b = 0; b < n; ++b) emit(b, zero, _mm256_setzero_ps(), _mm256_setzero_ps());
        return;
    }
    const InterleavedBlock& layout = interleaved_block(a.type);
    const bool q8 = a.type == Type::Q8_0;
    const auto half = static_cast<std::size_t>(r0 % 16 / 8);
    const std::uint8_t* group = a.weights + static_cast<std::size_t>(r0 - r0 % 16) * a.row_bytes;
    const float offset = q8 ? -128.0f : layout.has_high_bits() ? -16.0f : -8.0f;
    for (std::size_t b = 0; b < n; ++b) {
        __m256i word[8];
        const std::uint8_t* block = group + b * layout.bytes;
        const std::uint8_t* codes = block + half * layout.codes;
        if (q8) {
            for (int w = 0; w < 8; ++w)
                word[w] = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(codes + 32 * static_cast<std::size_t>(w)));
        } else if (layout.has_high_bits()) {
            const __m256i fifth = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(block + layout.high_bits + half * 32));
            for (int j = 0; j < 4; ++j)
                interleaved_nibble_words<true>(codes, j, fifth, word[j], word[j + 4]);
        } else {
            for (int j = 0; j < 4; ++j)
                interleaved_nibble_words<false>(codes, j, _mm256_setzero_si256(), word[j],
                                                word[j + 4]);
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(block + layout.scales + half * 16)));
        const __m256 coef = layout.has_mins()
                                ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                      block + layout.mins + half * 16)))
                                : _mm256_mul_ps(d, _mm256_set1_ps(offset));
        emit(b, word, d, coef);
    }
}

// Blocks of up to 8 rows of a 32-block type (`here` of them from row r0, the rest taken as
// zero) in the lane GEMMs' word order, for their packers: per block b, emit(b, word, d, coef)
// gets word[w] holding bytes 4w..4w+3 of the block's codes for rows 0..7 in lanes 0..7, and the
// rows' scales and offset terms as pack_q32_simd makes them (coef = -offset * d, or the min of
// Q4_1/Q5_1). The codes are the unsigned u of pack_q32_row for Q4_0/Q4_1/Q5_0/Q5_1 and Q8_0's
// signed bytes (u - 128).
//
// Each block's codes are transposed by words as loaded, two 4- or 5-bit blocks at a time (16
// nibble bytes each: words 0-3 are the low nibbles, 4-7 the high ones); the 8 rows' scale and
// min come in one gather of each block's first 4 bytes, and Q5's fifth bits in one gather of
// its 32 high bits, spread to bit 4 of each code byte: bits 4w..4w+3 of a row's high bits
// belong to word w. The per-row path it replaced (pack_q32_simd into per-row arrays, then 8
// rows transposed and their scales copied one float at a time) was a third of a 32-token
// SmolLM2 prefill.
template <class Emit>
void q32_words_of_8_rows(const MatmulArgs& a, std::int64_t r0, int here, Emit&& emit) {
    const auto n = static_cast<std::size_t>(a.n / 32);
    if (here <= 0) {  // no real row: zero lanes
        const __m256i zero[8] = {};
        for (std::size_t b = 0; b < n; ++b) emit(b, zero, _mm256_setzero_ps(), _mm256_setzero_ps());
        return;
    }
    const std::size_t bb = a.row_bytes / n;
    const Type type = a.type;
    // Where each type keeps its codes and fifth bits (qh 0: none), and its offset or min.
    std::size_t qs = offsetof(BlockQ4_0, qs), qh = 0;
    float offset = 8.0f;
    bool has_min = false;
    switch (type) {
        case Type::Q4_1:
            qs = offsetof(BlockQ4_1, qs), has_min = true;
            break;
        case Type::Q5_0:
            qs = offsetof(BlockQ5_0, qs), qh = offsetof(BlockQ5_0, qh), offset = 16.0f;
            break;
        case Type::Q5_1:
            qs = offsetof(BlockQ5_1, qs), qh = offsetof(BlockQ5_1, qh), has_min = true;
            break;
        case Type::Q8_0:
            qs = offsetof(BlockQ8_0, qs), offset = 128.0f;
            break;
        default:
            break;
    }
    const bool q8 = type == Type::Q8_0;
    const __m256 neg_offset = _mm256_set1_ps(-offset);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    const std::uint8_t* first = a.weights + static_cast<std::size_t>(r0) * a.row_bytes;
    // Byte offsets of the rows from the first, 64-bit for any row size (missing rows read the
    // first and are masked), for two gathers of 4 lanes.
    alignas(32) std::int64_t offsets[kLanes];
    for (int i = 0; i < kLanes; ++i)
        offsets[i] = i < here ? static_cast<std::int64_t>(static_cast<std::size_t>(i) * a.row_bytes)
                              : 0;
    const __m256i offs_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
    const __m256i offs_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets + 4));
    const __m256i present =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(here), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    // The 32-bit word at byte `at` of block b of each row, 0 for missing rows.
    auto gather = [&](std::size_t b, std::size_t at) {
        const auto* base = reinterpret_cast<const int*>(first + b * bb + at);
        return _mm256_and_si256(
            _mm256_set_m128i(_mm256_i64gather_epi32(base, offs_hi, 1),
                             _mm256_i64gather_epi32(base, offs_lo, 1)),
            present);
    };
    auto scales = [&](std::size_t b, const __m256i (&word)[8]) {
        // Per lane: the block's d in the low half, the min (or the next bytes) in the high.
        const __m256i dm = gather(b, 0);
        // [d0-3, m0-3 | d4-7, m4-7] as 16-bit values, then [d0-7 | m0-7].
        const __m256i halves = _mm256_permute4x64_epi64(
            _mm256_packus_epi32(_mm256_and_si256(dm, low16), _mm256_srli_epi32(dm, 16)),
            _MM_SHUFFLE(3, 1, 2, 0));
        const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
        emit(b, word, d,
             has_min ? _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1))
                     : _mm256_mul_ps(d, neg_offset));
    };
    // Per word w: the byte of the high bits that holds bits 4w..4w+3 copied to the word's 4
    // bytes, and the bit each byte keeps.
    const __m256i dword_bytes = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                                 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
    const __m256i bits_even = _mm256_set1_epi32(0x08040201);
    const __m256i bits_odd = _mm256_set1_epi32(static_cast<int>(0x80402010u));
    const __m256i fifth = _mm256_set1_epi8(0x10);
    for (std::size_t b = 0; b < n; b += q8 ? 1 : 2) {
        const bool pair = !q8 && b + 1 < n;
        __m256i r[kLanes], v[kLanes];
        for (int i = 0; i < kLanes; ++i) {
            const std::uint8_t* p = first + static_cast<std::size_t>(offsets[i]) + b * bb + qs;
            if (i >= here) {
                r[i] = _mm256_setzero_si256();
            } else if (q8) {
                r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
            } else {
                const __m128i hi = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + bb))
                                        : _mm_setzero_si128();
                r[i] = _mm256_set_m128i(hi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
            }
        }
        transpose_words8(r, v);
        if (q8) {
            scales(b, v);
            continue;
        }
        for (std::size_t k = 0; k < (pair ? 2u : 1u); ++k) {
            __m256i word[8];
            for (std::size_t w = 0; w < 4; ++w) {
                const __m256i x = v[4 * k + w];
                word[w] = _mm256_and_si256(x, low4);
                word[w + 4] = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
            }
            if (qh != 0) {
                const __m256i high = gather(b + k, qh);
                for (int w = 0; w < 8; ++w) {
                    const __m256i spread = _mm256_shuffle_epi8(
                        high, _mm256_add_epi8(dword_bytes, _mm256_set1_epi8(static_cast<char>(w / 2))));
                    const __m256i bit = w % 2 ? bits_odd : bits_even;
                    word[w] = _mm256_or_si256(
                        word[w],
                        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), fifth));
                }
            }
            scales(b + k, word);
        }
    }
}

// The lane GEMMs' packers take 8 rows' words from either layout: the groups of a matrix stored
// interleaved (a.interleaved), else the file's rows.
template <class Emit>
void words_of_8_rows(const MatmulArgs& a, std::int64_t r0, int here, Emit&& emit) {
    if (a.interleaved) {
        interleaved_words_of_8_rows(a, r0, here, emit);
    } else {
        q32_words_of_8_rows(a, r0, here, emit);
    }
}

// Prefetches the next row group's weights into L2 a slice at a time while the current group's
// token tiles run: step(i) of `steps` requests the i-th slice. Requested all at once just
// before the group is packed (the row tiles' prefetch_ahead), the lines had no time to arrive
// and the packer waited on them; in a profile of batched decode the spread requests cost 0.2 %
// of the samples.
struct SpreadPrefetch {
    const std::uint8_t* p = nullptr;
    std::size_t lines = 0;
    std::int64_t steps = 1;

    void step(std::int64_t i) const {
        if (p == nullptr) return;
        const std::size_t from =
            lines * static_cast<std::size_t>(i) / static_cast<std::size_t>(steps);
        const std::size_t to =
            lines * static_cast<std::size_t>(i + 1) / static_cast<std::size_t>(steps);
        for (std::size_t l = from; l < to; ++l)
            _mm_prefetch(reinterpret_cast<const char*>(p + 64 * l), _MM_HINT_T1);
    }
};

// The next `rows` weight rows from row r (nothing at or past w_end), spread over `steps` steps.
inline SpreadPrefetch next_rows(const MatmulArgs& a, std::int64_t r, std::int64_t rows,
                                const std::uint8_t* w_end, std::int64_t steps) {
    SpreadPrefetch s;
    const std::uint8_t* p = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    if (p >= w_end) return s;
    const auto left = static_cast<std::size_t>(w_end - p);
    const std::size_t bytes = static_cast<std::size_t>(rows) * a.row_bytes;
    s.p = p;
    s.lines = ((bytes < left ? bytes : left) + 63) / 64;
    s.steps = steps > 0 ? steps : 1;
    return s;
}

// The loop every lane GEMM shares. The call's weight rows go in passes of up to kPassRows rows:
// each pass packs its groups of group_rows rows once (packed[g].pack(a, r, rows)), then runs
// the tokens kTokenBlock at a time, every group of the pass over a block before the next
// block, T tokens per tile and a shorter tile at the end (tile(std::integral_constant<int, N>,
// packed[g], r, rows, t0) for N = T..1). The next pass's weights are prefetched slice by slice
// meanwhile.
//
// Why passes of several groups and blocks of tokens: with one group over all the call's tokens,
// a group's output of every token is one cache line, a whole row stride from the next token's,
// and row strides are multiples of 1 KiB (out_stride 1536, 2816 floats), so the lines of all
// tokens fall into a few L1 sets (2 of 64 for 1536 rows) and, we think, evict each other and
// the tile's own data (not the page walks: the same runs with transparent huge pages for every
// allocation measured the same). A pass writes 8 lines side by side per token.
// One thread, AVX2, 512 tokens, GFLOP/s, one group at a time -> passes of 8 groups in blocks
// of 48 tokens:
// - Q4_K 2816 x 1024: 119-138 -> 170 (128 tokens: 162-169 either way);
// - Q4_1 1536 x 576: 122 -> 168 (128 tokens: 94 -> 152);
// - Q8_0 2816 x 1024: 85 -> 103.
// AVX-512 Q4_K (32-row groups) moved by 1-2 percent. Blocks of 24 tokens measured the same as
// 48; passes of 2 groups did not help, passes of 4 half as much as 8. A pass's packed rows are
// re-read for every block, so a pass stays under kPassBytes (about half an L2 of 1-2 MiB): wide
// rows (an 8B model's 14336-wide down projection) go one group at a time, as before.
constexpr int kMaxPassGroups = 8;
constexpr std::int64_t kPassRows = 128;
constexpr std::size_t kPassBytes = std::size_t{512} << 10;
constexpr std::int64_t kTokenBlock = 48;

template <int T, class Tile, class Packed>
void run_tail_tile(const Tile& tile, const Packed& packed, std::int64_t r, int rows,
                   std::int64_t t0, int left) {
    if constexpr (T > 0) {
        if (left == T) {
            tile(std::integral_constant<int, T>{}, packed, r, rows, t0);
            return;
        }
        run_tail_tile<T - 1>(tile, packed, r, rows, t0, left);
    }
}

// Groups per pass: as many as kPassRows holds while their packed rows (Packed::packed_bytes
// for rows of a.n elements) stay within kPassBytes, and at least one.
template <class Packed>
int pass_groups(const MatmulArgs& a, int group_rows) {
    const std::size_t group_bytes = Packed::packed_bytes(a.n);
    std::int64_t groups = kPassRows / group_rows;
    while (groups > 1 && static_cast<std::size_t>(groups) * group_bytes > kPassBytes) --groups;
    return static_cast<int>(groups < 1 ? 1 : groups);
}

template <int T, class Packed, class Tile>
void for_lane_groups(const MatmulArgs& a, int group_rows, Packed (&packed)[kMaxPassGroups],
                     const Tile& tile) {
    const std::uint8_t* w_end = prefetch_end(a);
    const int groups = pass_groups<Packed>(a, group_rows);
    const std::int64_t pass_rows = static_cast<std::int64_t>(groups) * group_rows;
    const std::int64_t block = kTokenBlock / T * T;
    for (std::int64_t r = a.row_begin; r < a.row_end; r += pass_rows) {
        int count = 0;
        int rows_of[kMaxPassGroups];
        for (; count < groups && r + count * group_rows < a.row_end; ++count) {
            const std::int64_t rg = r + count * group_rows;
            rows_of[count] =
                static_cast<int>(a.row_end - rg < group_rows ? a.row_end - rg : group_rows);
            packed[count].pack(a, rg, rows_of[count]);
        }
        // One slice per full tile of the pass.
        const SpreadPrefetch next =
            next_rows(a, r + pass_rows, pass_rows, w_end, a.tokens / T * count);
        std::int64_t done = 0;
        for (std::int64_t b0 = 0; b0 < a.tokens; b0 += block) {
            const std::int64_t b1 = a.tokens - b0 <= block ? a.tokens : b0 + block;
            for (int g = 0; g < count; ++g) {
                const std::int64_t rg = r + g * group_rows;
                std::int64_t t0 = b0;
                for (; t0 + T <= b1; t0 += T) {
                    next.step(done++);
                    tile(std::integral_constant<int, T>{}, packed[g], rg, rows_of[g], t0);
                }
                run_tail_tile<T - 1>(tile, packed[g], rg, rows_of[g], t0,
                                     static_cast<int>(b1 - t0));
            }
        }
    }
}

// Stores 8 lanes of results to out, only the first `valid` when the group is partial.
inline void store_lanes(float* out, __m256 v, int valid) {
    if (valid >= kLanes) {
        _mm256_storeu_ps(out, v);
        return;
    }
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, v);
    std::memcpy(out, lanes, static_cast<std::size_t>(valid) * sizeof(float));
}

// A lane GEMM tile's results: f[h][t] holds rows r0 + L h .. r0 + L h + L - 1 of token t0 + t
// (L = 8 for __m256, 16 for __m512, which only the AVX-512 files instantiate); only the first
// `rows` rows of the group are real and stored.
template <class V, int H, int T>
inline void store_tile_rows(const MatmulArgs& a, const V (&f)[H][T], std::int64_t r0, int rows,
                            std::int64_t t0) {
    constexpr int L = static_cast<int>(sizeof(V) / sizeof(float));
    for (int h = 0; h < H; ++h) {
        const int valid = rows - L * h;
        if (valid <= 0) break;
        for (int t = 0; t < T; ++t) {
            float* out = a.out + (t0 + t) * a.out_stride + r0 + L * h;
            if constexpr (L == 16) {
                const auto mask =
                    static_cast<__mmask16>(valid >= L ? 0xFFFF : (1u << valid) - 1);
                _mm512_mask_storeu_ps(out, mask, f[h][t]);
            } else {
                store_lanes(out, f[h][t], valid);
            }
        }
    }
}

// Up to R weight rows of a K-quant (R a multiple of 8), interleaved for the int8 tiles whose
// lanes are rows, packed once per call and then used by every token tile. Per super-block b:
//   u:    [b][group 0..63][row 0..R-1][4 bytes]       the rows' unsigned elements
//   sc:   [b][sub-block 0..15][row][2 x int16]         pmaddwd's operand: the sub-block scale twice
//   d:    [b][row]                                     super-block scales
//   coef: [b][sub-block 0..15][row]                    offset / min terms
// in pack_k_row's terms (matmul_internal.h). A register of 8 (AVX2) or 16 (AVX-512) rows is a
// contiguous slice of each. Rows past the end are zero everywhere, so their lanes compute 0.
template <int R>
struct InterleavedKRows {
    static_assert(R % kLanes == 0);
    static constexpr std::size_t kU = 64 * R * 4, kSc = 16 * R * 4, kD = R * 4, kCoef = 16 * R * 4;

    // Bytes of one packed group of rows of n elements.
    static std::size_t packed_bytes(std::int64_t n) {
        return static_cast<std::size_t>(n / 256) * (kU + kSc + kD + kCoef);
    }

    std::int64_t nb = 0;
    std::uint8_t* u = nullptr;
    std::int16_t* sc = nullptr;
    float* d = nullptr;
    float* coef = nullptr;

    // Rows [r0, r0 + rows) of the call's weights.
    void pack(const MatmulArgs& a, std::int64_t r0, int rows) {
        nb = a.n / 256;
        if (a.interleaved) {  // every K-quant has that layout; rows come in whole groups of 16
            static_assert(R % kInterleavedGroupRows == 0);
            take_buffer(a.n);
            // Where the call ends in the middle of R (the AVX-512 GEMM's 32 rows, a matrix or
            // chunk of an odd number of groups), the missing group's lanes are all zero.
            if (rows < R) std::memset(u, 0, packed_bytes(a.n));
            for (int g = 0; kInterleavedGroupRows * g < rows; ++g) {
                const std::uint8_t* group =
                    a.weights +
                    static_cast<std::size_t>(r0 + kInterleavedGroupRows * g) * a.row_bytes;
                const auto lane0 = static_cast<std::size_t>(kInterleavedGroupRows * g);
                if (a.type == Type::Q4_K) pack_q4_k_interleaved<Type::Q4_K>(group, lane0);
                if (a.type == Type::Q5_K) pack_q4_k_interleaved<Type::Q5_K>(group, lane0);
                if (a.type == Type::Q6_K) pack_k16_interleaved<Type::Q6_K>(group, lane0);
                if (a.type == Type::Q3_K) pack_k16_interleaved<Type::Q3_K>(group, lane0);
                if (a.type == Type::Q2_K) pack_k16_interleaved<Type::Q2_K>(group, lane0);
            }
            return;
        }
        if (a.type == Type::Q4_K) {
            pack_q4_k(a, r0, rows);
            return;
        }
        const auto n = static_cast<std::size_t>(nb);
        // pack_k_simd's arrays for 8 rows at a time: u, sc16, coef, d.
        const std::size_t row_u = n * 256, row_sc = n * 128, row_c = n * 16;
        const std::size_t tmp_bytes = kLanes * (row_u + 2 * row_sc + 4 * n + 4 * row_c);
        take_buffer(a.n, tmp_bytes);
        auto* tu = reinterpret_cast<std::uint8_t*>(coef + n * kCoef / sizeof(float));
        auto* tsc = reinterpret_cast<std::int16_t*>(tu + kLanes * row_u);
        auto* tc = reinterpret_cast<float*>(tsc + kLanes * row_sc);
        auto* td = tc + kLanes * row_c;
        for (int s = 0; s < R / kLanes; ++s) {
            const int here = rows - kLanes * s < kLanes ? rows - kLanes * s : kLanes;
            if (here < kLanes) std::memset(tu, 0, tmp_bytes);  // missing rows: all zero
            for (int r = 0; r < here; ++r) {
                const auto i = static_cast<std::size_t>(r);
                pack_k_simd(a.type,
                            a.weights + static_cast<std::size_t>(r0 + kLanes * s + r) * a.row_bytes,
                            nb, tu + i * row_u, tsc + i * row_sc, td + i * n, tc + i * row_c);
            }
            const auto lane0 = static_cast<std::size_t>(kLanes * s);
            for (std::size_t b = 0; b < n; ++b) {
                for (int c = 0; c < 8; ++c)
                    interleave_rows32(
                        tu + 256 * b + 32 * c, row_u,
                        u + b * kU + static_cast<std::size_t>(8 * c) * R * 4 + 4 * lane0, R * 4);
                // A sub-block's scale is the same int16 pair all along sc16, so one 32-bit word
                // per row (every 16 bytes) is the row's lane of pmaddwd's operand: gathered
                // into rows of 16 words, then transposed like u and the offset terms. (Copied
                // one scalar at a time, sc and coef cost as much as a 16-token tile.)
                alignas(32) std::int32_t words[kLanes][16];
                const __m256i every16 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
                for (std::size_t i = 0; i < kLanes; ++i) {
                    const auto* src = reinterpret_cast<const int*>(tsc + i * row_sc + 128 * b);
                    _mm256_store_si256(reinterpret_cast<__m256i*>(words[i]),
                                       _mm256_i32gather_epi32(src, every16, 4));
                    _mm256_store_si256(reinterpret_cast<__m256i*>(words[i] + 8),
                                       _mm256_i32gather_epi32(src + 32, every16, 4));
                }
                auto* sb = reinterpret_cast<std::uint8_t*>(sc + b * kSc / 2);
                auto* cb = reinterpret_cast<std::uint8_t*>(coef + b * kCoef / 4);
                for (std::size_t half = 0; half < 2; ++half) {
                    interleave_rows32(reinterpret_cast<const std::uint8_t*>(words) + 32 * half, 64,
                                      sb + (8 * half * R + lane0) * 4, R * 4);
                    interleave_rows32(reinterpret_cast<const std::uint8_t*>(tc + 16 * b + 8 * half),
                                      row_c * 4, cb + (8 * half * R + lane0) * 4, R * 4);
                }
                for (std::size_t i = 0; i < kLanes; ++i) d[b * R + lane0 + i] = td[i * n + b];
            }
        }
    }

  private:
    // The packed arrays of one group of rows of n / 256 super-blocks, in buffer_, with `extra`
    // bytes of scratch after them.
    void take_buffer(std::int64_t n_elements, std::size_t extra = 0) {
        const auto n = static_cast<std::size_t>(n_elements / 256);
        u = buffer_.get(packed_bytes(n_elements) + extra);
        sc = reinterpret_cast<std::int16_t*>(u + n * kU);
        d = reinterpret_cast<float*>(reinterpret_cast<std::uint8_t*>(sc) + n * kSc);
        coef = d + n * kD / sizeof(float);
    }

    // Super-block b's d and its 16 sub-blocks' scale words and offsets (16 elements each) of the
    // group's two registers of rows, from unpacked group scales (Q4KGroupScales: one per 32
    // elements, so each serves two; K16GroupScales: one per 16).
    // The group's rows are lanes lane0 .. lane0 + 15.
    template <class Scales>
    void store_group_scales(std::size_t b, const Scales& scales, std::size_t lane0) {
        // (sizeof, not std::extent_v of decltype: that names the vector type as a template
        // argument, and GCC warns that it drops its alignment attribute there.)
        constexpr std::size_t kPer = 16 / (sizeof(Scales::sc) / sizeof(Scales::sc[0]));
        for (std::size_t h = 0; h < 2; ++h) {
            const std::size_t lane = lane0 + kLanes * h;
            _mm256_store_ps(d + b * R + lane, scales.d[h]);
            for (std::size_t j = 0; j < 16; ++j) {
                _mm256_store_si256(
                    reinterpret_cast<__m256i*>(sc + b * kSc / 2 + (j * R + lane) * 2),
                    scales.sc[j / kPer][h]);
                _mm256_store_ps(coef + b * kCoef / 4 + j * R + lane, scales.coef[j / kPer][h]);
            }
        }
    }

    // Q4_K or Q5_K stored interleaved (interleaved_rows.h; rows come in whole groups of 16): the
    // codes are 8 rows' words already, so each stored word's low nibbles are a word of one
    // sub-block and its high nibbles the same word of the next (q4_k_code_word); the scales as
    // the decode tile unpacks them.
    // The group at `group` into lanes lane0 .. lane0 + 15.
    template <Type W>
    void pack_q4_k_interleaved(const std::uint8_t* group, std::size_t lane0) {
        constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
        Q4KGroupScales scales;
        for (std::size_t b = 0; b < static_cast<std::size_t>(nb); ++b) {
            const std::uint8_t* block = group + b * kLayout.bytes;
            for (int h = 0; h < 2; ++h) {
                for (int w = 0; w < 32; ++w) {
                    const auto g = static_cast<std::size_t>(16 * (w / 8) + w % 8);  // low nibbles'
                    auto* lo =
                        u + b * kU + (g * R + lane0 + kLanes * static_cast<std::size_t>(h)) * 4;
                    _mm256_store_si256(reinterpret_cast<__m256i*>(lo),
                                       q4_k_code_word<W>(block, h, w, 0));
                    _mm256_store_si256(reinterpret_cast<__m256i*>(lo + 8 * R * 4),
                                       q4_k_code_word<W>(block, h, w, 1));
                }
            }
            unpack_q4_k_group_scales<W>(block, scales);
            store_group_scales(b, scales, lane0);
        }
    }

    // Q2_K, Q3_K or Q6_K stored interleaved: each code word made as the decode tile makes it
    // (k16_code_word), the scales as unpack_k16_group_scales gives them.
    template <Type W>
    void pack_k16_interleaved(const std::uint8_t* group, std::size_t lane0) {
        constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
        K16GroupScales scales;
        for (std::size_t b = 0; b < static_cast<std::size_t>(nb); ++b) {
            const std::uint8_t* block = group + b * kLayout.bytes;
            for (int h = 0; h < 2; ++h) {
                for (int half = 0; half < 2; ++half) {
                    for (int k = 0; k < 4; ++k) {
                        for (int v = 0; v < 8; ++v) {
                            const auto g = static_cast<std::size_t>(32 * half + 8 * k + v);
                            _mm256_store_si256(
                                reinterpret_cast<__m256i*>(
                                    u + b * kU +
                                    (g * R + lane0 + kLanes * static_cast<std::size_t>(h)) * 4),
                                k16_code_word<W>(block, h, half, k, v));
                        }
                    }
                }
            }
            unpack_k16_group_scales<W>(block, scales);
            store_group_scales(b, scales, lane0);
        }
    }

    // Q4_K straight from the blocks into the interleaved layout, the same bytes as the general
    // path above (pack_k_simd into per-row arrays, then interleaved): 32 bytes of nibbles of 8
    // rows are transposed as loaded and split after (low nibbles are one 32-element sub-block,
    // high nibbles the next), and each row's 16 scale words and offsets come from its 12 scale
    // bytes in registers, where the general path wrote 256 bytes of repeated scales per block
    // and gathered 16 words back out of them. Q4_K is most of a Q4_K_M file's rows.
    void pack_q4_k(const MatmulArgs& a, std::int64_t r0, int rows) {
        const auto n = static_cast<std::size_t>(nb);
        take_buffer(a.n);
        const __m256i low4 = _mm256_set1_epi8(0x0F);
        const __m256i pair_lo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
        const __m256i pair_hi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
        for (int s = 0; s < R / kLanes; ++s) {
            const int here = rows - kLanes * s < kLanes ? rows - kLanes * s : kLanes;
            const auto lane0 = static_cast<std::size_t>(kLanes * s);
            const std::uint8_t* row[kLanes];
            for (int i = 0; i < kLanes; ++i) {
                row[i] = i < here ? a.weights +
                                        static_cast<std::size_t>(r0 + kLanes * s + i) * a.row_bytes
                                  : nullptr;  // missing rows: all zero
            }
            for (std::size_t b = 0; b < n; ++b) {
                const std::size_t off = b * sizeof(BlockQ4_K);
                for (int q = 0; q < 4; ++q) {
                    __m256i r[kLanes], v[kLanes];
                    for (int i = 0; i < kLanes; ++i) {
                        r[i] = row[i] ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                            row[i] + off + offsetof(BlockQ4_K, qs) + 32 * q))
                                      : _mm256_setzero_si256();
                    }
                    transpose_words8(r, v);
                    // Chunk 2q: low nibbles, chunk 2q + 1: high nibbles; group g = 8 chunk + gg.
                    for (int gg = 0; gg < 8; ++gg) {
                        auto* lo = reinterpret_cast<__m256i*>(
                            u + b * kU + static_cast<std::size_t>(8 * (2 * q) + gg) * R * 4 +
                            4 * lane0);
                        auto* hi = reinterpret_cast<__m256i*>(
                            u + b * kU + static_cast<std::size_t>(8 * (2 * q + 1) + gg) * R * 4 +
                            4 * lane0);
                        _mm256_store_si256(lo, _mm256_and_si256(v[gg], low4));
                        _mm256_store_si256(hi, _mm256_and_si256(_mm256_srli_epi16(v[gg], 4), low4));
                    }
                }
                // Per row: 16 words (sub-block j's scale twice as int16, pmaddwd's operand) and
                // 16 offsets -dmin * m, j covering elements 16j..16j+15 (so each 32-element
                // sub-block's scale and min twice), as pack_q4_k_scales makes them.
                alignas(32) std::int32_t words[kLanes][16];
                alignas(32) float mins[kLanes][16];
                for (int i = 0; i < kLanes; ++i) {
                    if (!row[i]) {
                        std::memset(words[i], 0, sizeof(words[i]));
                        std::memset(mins[i], 0, sizeof(mins[i]));
                        d[b * R + lane0 + static_cast<std::size_t>(i)] = 0.0f;
                        continue;
                    }
                    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row[i] + off);
                    const Q4KScalesMins sm = q4_k_scales_mins_words(blk->scales);
                    const __m256i s32 =
                        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sm.sc)));
                    const __m256i pairs = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
                    _mm256_store_si256(reinterpret_cast<__m256i*>(words[i]),
                                       _mm256_permutevar8x32_epi32(pairs, pair_lo));
                    _mm256_store_si256(reinterpret_cast<__m256i*>(words[i] + 8),
                                       _mm256_permutevar8x32_epi32(pairs, pair_hi));
                    const __m256 m = _mm256_mul_ps(
                        _mm256_cvtepi32_ps(
                            _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sm.m)))),
                        _mm256_set1_ps(-half_to_float(blk->dmin)));
                    _mm256_store_ps(mins[i], _mm256_permutevar8x32_ps(m, pair_lo));
                    _mm256_store_ps(mins[i] + 8, _mm256_permutevar8x32_ps(m, pair_hi));
                    d[b * R + lane0 + static_cast<std::size_t>(i)] = half_to_float(blk->d);
                }
                auto* sb = reinterpret_cast<std::uint8_t*>(sc + b * kSc / 2);
                auto* cb = reinterpret_cast<std::uint8_t*>(coef + b * kCoef / 4);
                for (std::size_t half = 0; half < 2; ++half) {
                    interleave_rows32(reinterpret_cast<const std::uint8_t*>(words) + 32 * half, 64,
                                      sb + (8 * half * R + lane0) * 4, R * 4);
                    interleave_rows32(reinterpret_cast<const std::uint8_t*>(mins) + 32 * half, 64,
                                      cb + (8 * half * R + lane0) * 4, R * 4);
                }
            }
        }
    }

    ScratchBuffer buffer_;
};

}  // namespace
}  // namespace tokenscope::tensor::detail
