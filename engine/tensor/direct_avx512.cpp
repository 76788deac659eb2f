// AVX-512 decode and small-batch kernels (1-15 tokens) that read the weight blocks in place:
// each block is decoded in registers once and multiplied at once for every token, so nothing
// is written and read back (the packed path, which stages every block through an aligned copy,
// cost about as much as the dot products for one token). The AVX2 versions (dot_avx2.cpp)
// work on 32 weights at a time; these on 64, with vpdpbusd / vpdpwssd folding the
// multiply-add-add of AVX2 into one instruction.
//
// Every token runs the same operations in the same order for any token count, so a token's
// result in a small batch is bit-identical to its decode step (speculative decoding's greedy
// output equals plain decoding token for token; test_matmul smallBatchesMatchDecodeBitForBit).
//
// Compiled with AVX-512 F/BW/VL/DQ/VNNI and called only when the CPU has them.
#include "tensor/avx512_gcc_warnings.h"  // first: it silences a GCC 12 false positive

#include <immintrin.h>

#include <cstddef>

#include "tensor/block_heads_avx512.h"
#include "tensor/int8_lanes_avx2.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/pack_simd256.h"

namespace tokenscope::tensor::detail {

namespace {

inline __m512i load512(const std::uint8_t* p) {
    return _mm512_loadu_si512(p);
}

// A vpermw index that gives int16 lane l the scale first + l / group: each sub-block's scale
// spread over the lanes (element pairs) of its elements.
inline __m512i scale_pick(int first, int group) {
    alignas(64) std::int16_t idx[32];
    for (int l = 0; l < 32; ++l) idx[l] = static_cast<std::int16_t>(first + l / group);
    return _mm512_load_si512(idx);
}

// The integer sum over one super-block of one token: four vectors of 64 unsigned weights u times
// the token's int8 activations x in pairs (maddubs), times each pair's sub-block scale
// (vpdpwssd), in two chains.
inline __m512i superblock_dot(const __m512i (&u)[4], const __m512i (&s16)[4],
                              const std::uint8_t* x) {
    __m512i i0 = _mm512_setzero_si512(), i1 = _mm512_setzero_si512();
    i0 = _mm512_dpwssd_epi32(i0, _mm512_maddubs_epi16(u[0], load512(x)), s16[0]);
    i1 = _mm512_dpwssd_epi32(i1, _mm512_maddubs_epi16(u[1], load512(x + 64)), s16[1]);
    i0 = _mm512_dpwssd_epi32(i0, _mm512_maddubs_epi16(u[2], load512(x + 128)), s16[2]);
    i1 = _mm512_dpwssd_epi32(i1, _mm512_maddubs_epi16(u[3], load512(x + 192)), s16[3]);
    return _mm512_add_epi32(i0, i1);
}

// Q4_K, and with kFifth Q5_K (same header and scales, 32 bytes of fifth bits before the
// nibbles), for T tokens and one row. Per super-block: d * d_a * sum_s sc[s] * sum(q * q_a)
// - dmin * sum_s m[s] * s_a(s), s_a(s) the activation sums of sub-block s's two halves.
// A 64-byte load of nibbles holds sub-blocks 4h, 4h+2 (low nibbles) and 4h+1, 4h+3 (high);
// two 128-bit lane shuffles put them in element order, so the activations load as they are.
template <bool kFifth, int T, bool kPieces>
void q4_k_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 256;
    constexpr std::size_t kBlockBytes = kFifth ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i one = _mm512_set1_epi8(1);
    // pick[k]: int16 lanes 0-15 take scale 2k, 16-31 scale 2k + 1 (a 64-element pair).
    __m512i pick[4];
    for (int k = 0; k < 4; ++k) pick[k] = scale_pick(2 * k, 16);
    // Fifth bits: qh[l] bit s is element 32s + l's; the upper half starts one bit later.
    const __m512i shift01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    __m512 acc[T], min_acc[T];
    for (int t = 0; t < T; ++t) acc[t] = min_acc[t] = _mm512_setzero_ps();
    RowPrefetch<kPieces> prefetch(a, r, t0);
    for (std::int64_t b = 0; b < nb; ++b) {
        const std::uint8_t* blk = row + static_cast<std::size_t>(b) * kBlockBytes;
        prefetch.reach(static_cast<std::size_t>(b) * kBlockBytes);
        const Q4KScalesMins sm = q4_k_scales_mins_words(blk + 4);
        const __m512i sc512 = _mm512_castsi128_si512(
            _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sm.sc))));
        // Each sub-block's min twice: it covers two of the 16-element activation sums.
        const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(sm.m));
        const __m512 mins_d =
            _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(m8, m8))),
                          _mm512_set1_ps(half_to_float(blk + 2)));
        const float d = half_to_float(blk);
        const std::uint8_t* qs = blk + offsetof(BlockQ4_K, qs) + (kFifth ? 32 : 0);
        [[maybe_unused]] __m512i qh;
        if constexpr (kFifth) {
            qh = _mm512_srlv_epi16(
                _mm512_broadcast_i64x4(_mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ5_K, qh)))),
                shift01);
        }
        __m512i w[4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m512i q = load512(qs + 64 * h);
            const __m512i lo = _mm512_and_si512(q, low4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
            w[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);      // sub-blocks 4h, 4h + 1
            w[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);  // 4h + 2, 4h + 3
            if constexpr (kFifth) {
                for (int k = 2 * h; k < 2 * h + 2; ++k) {
                    const __m512i bit =
                        _mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), one);
                    w[k] = _mm512_or_si512(w[k], _mm512_slli_epi16(bit, 4));
                }
            }
        }
        __m512i s16[4];
        for (int k = 0; k < 4; ++k) s16[k] = _mm512_permutexvar_epi16(pick[k], sc512);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            min_acc[t] = _mm512_fmadd_ps(mins_d, _mm512_loadu_ps(acts.s[t] + 16 * b), min_acc[t]);
            acc[t] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(superblock_dot(w, s16, acts.q[t] + 256 * b)),
                                _mm512_set1_ps(d * acts.d[t][b]), acc[t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        a.out[(t0 + t) * a.out_stride + r] =
            _mm512_reduce_add_ps(_mm512_sub_ps(acc[t], min_acc[t]));
    }
}

// Q6_K, Q3_K, Q2_K (16 sub-blocks of 16) for T tokens, one row: the scales and offset terms
// decoded in registers (k16_scales), two 32-element chunks (k16_chunk) per 512-bit vector,
// and vpdpwssd applying the four sub-block scales of those 64 elements.
// dot = d * d_a * sum_j sc[j] * sum(u * q_a) + sum_j coef[j] * s16_a[j] (pack_k_row).
template <Type W, int T, bool kPieces>
void k16_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 256;
    const std::size_t block_bytes = a.row_bytes / static_cast<std::size_t>(nb);
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    // pick[p]: the scales of sub-blocks 4p .. 4p + 3, 8 int16 lanes (16 elements) each.
    __m512i pick[4];
    for (int p = 0; p < 4; ++p) pick[p] = scale_pick(4 * p, 8);
    __m512 acc[T], coef_acc[T];
    for (int t = 0; t < T; ++t) acc[t] = coef_acc[t] = _mm512_setzero_ps();
    RowPrefetch<kPieces> prefetch(a, r, t0);
    for (std::int64_t b = 0; b < nb; ++b) {
        const std::uint8_t* blk = row + static_cast<std::size_t>(b) * block_bytes;
        prefetch.reach(static_cast<std::size_t>(b) * block_bytes);
        const K16Scales k = k16_scales<W>(blk);
        const __m512i sc512 = _mm512_castsi256_si512(k.sc16);
        const __m512 coef = _mm512_insertf32x8(_mm512_castps256_ps512(k.coef[0]), k.coef[1], 1);
        __m512i u[4], s16[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
            u[p] = _mm512_inserti64x4(_mm512_castsi256_si512(k16_chunk<W>(blk, 2 * p)),
                                      k16_chunk<W>(blk, 2 * p + 1), 1);
            s16[p] = _mm512_permutexvar_epi16(pick[p], sc512);
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            coef_acc[t] = _mm512_fmadd_ps(coef, _mm512_loadu_ps(acts.s[t] + 16 * b), coef_acc[t]);
            acc[t] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(superblock_dot(u, s16, acts.q[t] + 256 * b)),
                                _mm512_set1_ps(k.d * acts.d[t][b]), acc[t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        a.out[(t0 + t) * a.out_stride + r] =
            _mm512_reduce_add_ps(_mm512_add_ps(acc[t], coef_acc[t]));
    }
}

// Q4_0, Q4_1, Q5_0, Q5_1 for T tokens, one row, two 32-element blocks per 512-bit vector:
// vpdpbusd sums the unsigned weights times the int8 activations in groups of 4 (8 lanes per
// block), and the two blocks' d * d_a scale them in one fma. The weight scales (and Q4_1 /
// Q5_1 mins) of 16 blocks are collected and converted at once; the offset (8 or 16) or min
// term is sum_b coef_b * s_a(b), one fma per 16 blocks.
template <Type W, int T, bool kPieces>
void q32_row(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = a.n / 32;
    using F = NibbleLayout<W>;
    constexpr std::size_t bb = F::kBlockBytes;
    const std::uint8_t* row = a.weights + static_cast<std::size_t>(r) * a.row_bytes;
    constexpr bool kHasMin = F::kHasMin;
    constexpr bool kFifth = F::kFifth;
    constexpr float kOffset = F::kOffset;
    constexpr std::size_t kNibbles = F::kNibbles;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    // 128-bit lanes 0 and 2 keep the low nibbles (elements 0-15), 1 and 3 the high (16-31).
    const __m512i nibble_shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    const __m512i pair0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const BlockHeads<bb> heads;
    __m512 acc[T], corr[T];
    for (int t = 0; t < T; ++t) acc[t] = corr[t] = _mm512_setzero_ps();
    RowPrefetch<kPieces> prefetch(a, r, t0);
    for (std::int64_t g = 0; g < nb; g += 16) {
        const int count = static_cast<int>(min_of(16, nb - g));
        const std::uint8_t* gb = row + static_cast<std::size_t>(g) * bb;
        prefetch.reach(static_cast<std::size_t>(g) * bb);
        const __m512i head = heads.load(gb, count);
        const __m512 wd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
        // coef_b: Q4_1 / Q5_1 the min m; Q4_0 / Q5_0 -offset * d.
        __m512 coef;
        if constexpr (kHasMin) {
            coef = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
        } else {
            coef = _mm512_mul_ps(wd, _mm512_set1_ps(-kOffset));
        }
        __m512 scale[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            corr[t] = _mm512_fmadd_ps(coef, _mm512_loadu_ps(acts.s[t] + g), corr[t]);
            scale[t] = _mm512_mul_ps(wd, _mm512_loadu_ps(acts.d[t] + g));
        }
        if constexpr (!kFifth) {
            if (count == 16) {
                // A full group of Q4_0 / Q4_1 with blocks in the 32-bit lanes, lane l = block l,
                // over the activations' interleaved copy (64-byte word v holds word v of the
                // group's 16 blocks): four vectors of four blocks (block i + 4k in 128-bit lane
                // k) and a 4 x 4 transpose of words within the lanes give word j of all 16
                // blocks in block order; its low nibbles are elements 4j..4j+3 (activation word
                // j), its high nibbles 16+4j.. (word 4 + j). Eight vpdpbusd then sum each
                // block's 32 products in its lane, and the scales apply in one FMA per 16 blocks
                // instead of a vpermps and an FMA per pair. 1536 x 576 Q4_1, one thread, in
                // cache: see docs/benchmarks.md (thirteenth pass).
                __m512i quads[4];
                for (int i = 0; i < 4; ++i)
                    quads[i] = blocks_in_lanes<__m512i>(gb + i * bb + kNibbles, bb);
                __m512i u[8];
                nibble_words(quads, u);
                const std::size_t x_offset =
                    a.act_interleaved_offset + static_cast<std::size_t>(g / 16) * 512;
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    acc[t] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(dot_words8(u, acts.q[t] + x_offset)), scale[t], acc[t]);
                }
                continue;
            }
        }
        // Blocks 2q and 2q + 1 of the group; kPair false: a lone last block, whose upper half
        // is zero against activations that are zero there (padding), so it adds nothing.
        auto blocks = [&]<bool kPair>(int q) __attribute__((always_inline)) {
            const std::uint8_t* b0 = gb + bb * static_cast<std::size_t>(2 * q);
            const __m128i n0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + kNibbles));
            const __m128i n1 =
                kPair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + bb + kNibbles))
                      : _mm_setzero_si128();
            const __m512i both =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(n0)),
                                   _mm256_broadcastsi128_si256(n1), 1);
            __m512i w = _mm512_and_si512(_mm512_srlv_epi64(both, nibble_shift), low4);
            if constexpr (kFifth) {
                const std::uint64_t h0 = load_le32(b0 + F::kFifthBits);
                const std::uint64_t h1 = kPair ? load_le32(b0 + bb + F::kFifthBits) : 0;
                w = _mm512_or_si512(w,
                                    _mm512_maskz_mov_epi8(h0 | (h1 << 32), _mm512_set1_epi8(16)));
            }
            const __m512i sel = _mm512_add_epi32(pair0, _mm512_set1_epi32(2 * q));
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m512i x = load512(acts.q[t] + 32 * (g + 2 * q));
                const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                         _mm512_permutexvar_ps(sel, scale[t]), acc[t]);
            }
        };
        int q = 0;
#pragma GCC unroll 8
        for (; 2 * q + 1 < count; ++q) blocks.template operator()<true>(q);
        if (2 * q < count) blocks.template operator()<false>(q);
    }
    for (int t = 0; t < T; ++t) {
        a.out[(t0 + t) * a.out_stride + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t], corr[t]));
    }
}

template <Type W, int T, bool kPieces>
void row_kernel(const MatmulArgs& a, std::int64_t r, std::int64_t t0) {
    if constexpr (W == Type::Q4_K || W == Type::Q5_K) {
        q4_k_row<W == Type::Q5_K, T, kPieces>(a, r, t0);
    } else if constexpr (W == Type::Q6_K || W == Type::Q3_K || W == Type::Q2_K) {
        k16_row<W, T, kPieces>(a, r, t0);
    } else {
        q32_row<W, T, kPieces>(a, r, t0);
    }
}

// Tokens per pass over a row: a verification chunk of 5 tokens in one pass instead of 3 + 2
// decodes each weight block once. One thread, in cache, ms, against groups of 3: Q4_1 1536 x 576
// 4 tokens 0.100 -> 0.076, 5 0.115 -> 0.089, 9 0.183 -> 0.162; Q4_K 640 x 2048 5 tokens
// 0.130 -> 0.112, Q6_K 0.173 -> 0.128; Q5_0 2048 x 640 0.200 -> 0.160. Six spilled (Q4_1
// 6 tokens 0.128 -> 0.134). The AVX2 kernels, with 16 registers, gained nothing from 4 or 5.
constexpr int kTokensPerPass = 5;

template <Type W>
void run_rows(const MatmulArgs& a) {
    for_rows_in_token_groups<kTokensPerPass>(
        a, [&](std::int64_t r, std::int64_t t0, auto tokens, auto pieces) {
            row_kernel<W, decltype(tokens)::value, decltype(pieces)::value>(a, r, t0);
        });
}

}  // namespace

bool direct_avx512(const MatmulArgs& args) {
    switch (args.type) {
        case Type::Q4_0:
            run_rows<Type::Q4_0>(args);
            return true;
        case Type::Q4_1:
            run_rows<Type::Q4_1>(args);
            return true;
        case Type::Q5_0:
            run_rows<Type::Q5_0>(args);
            return true;
        case Type::Q5_1:
            run_rows<Type::Q5_1>(args);
            return true;
        case Type::Q4_K:
            run_rows<Type::Q4_K>(args);
            return true;
        case Type::Q5_K:
            run_rows<Type::Q5_K>(args);
            return true;
        case Type::Q6_K:
            run_rows<Type::Q6_K>(args);
            return true;
        case Type::Q3_K:
            run_rows<Type::Q3_K>(args);
            return true;
        case Type::Q2_K:
            run_rows<Type::Q2_K>(args);
            return true;
        default:
            return false;
    }
}

}  // namespace tokenscope::tensor::detail
