// Q4_0, Q4_1, Q5_0 and Q5_1 rows stored interleaved (interleaved_rows.h) times a few tokens on
// AVX-512 (BW + VNNI): decode, speculative verification and batches under the lane GEMM's line
// (lane_gemm_min_tokens_avx512). A group's 16 rows fill the 32-bit lanes of one register (its two
// stored halves of 8 rows side by side), a token's 4 activation bytes are broadcast to every
// lane, and vpdpbusd adds 4 products per lane: a block's 32 products per row in 8 of them.
//
// Per block b, row r (a lane) and token t, the float operations of the AVX-512 lane GEMM
// (gemm_int8_q32_avx512.cpp) in its order, on the same exact integer sum:
//   f[r][t] = fma(float(sum_k u_r[k] * x_t[k] - o * isum_t), d_r * d_t, f[r][t])
//   f[r][t] = fma(m_r, s_t, f[r][t])                               Q4_1, Q5_1 only
// where o is Q4_0's or Q5_0's offset (8, 16; 0 for the others: kQ32IntegerOffset), added in the
// integers, so a token gets the lane GEMM's bits at every token count (test_matmul
// interleavedEqualsTheLaneGemmOfRows). It replaces the AVX2 tile (interleaved_avx2.cpp) at this
// level, which holds 8 rows per register and sums a block's products with vpmaddubsw, int16
// adds and vpmaddwd (and kept Q4_0/Q5_0's offset as a float term): in cache, one token Q5_0
// 1.5-1.6x, Q4_0 level, four tokens 1.2-2x (docs/benchmarks.md, thirty-eighth pass).
#include "tensor/avx512_gcc_warnings.h"  // first: it silences a GCC 12 false positive

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/group_halves_avx512.h"
#include "tensor/int8_lanes_avx2.h"
#include "tensor/interleaved_rows.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int kGroupRows = 16;  // one register of rows: a whole interleaved group
// Tokens per tile: T accumulators and T results, beside the block's 8 code registers.
constexpr int kTileTokens = 4;

// Word j (elements 4j..4j+3, low nibbles) and word j + 4 (elements 16 + 4j.., high nibbles) of a
// block's 16 rows, as interleaved_nibble_words makes them for 8. Q5_0/Q5_1 add each element's
// fifth bit as 16: qh holds the rows' 32 bits (bit e for element e), so after a shift by 4j byte
// 0 of a lane has the low word's four bits and byte 2 the high word's; each is copied to the
// lane's 4 bytes, byte k tested against bit k, and 16 added where it is set.
template <Type W>
inline void nibble_words(const std::uint8_t* block, int j, __m512i qh, __m512i& lo, __m512i& hi) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i v = both_halves(block + 32 * static_cast<std::size_t>(j), kLayout.codes);
    lo = _mm512_and_si512(v, low4);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    if constexpr (kLayout.has_high_bits()) {
        const __m512i byte0 = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0x00000000);
        const __m512i byte2 = _mm512_add_epi8(byte0, _mm512_set1_epi8(2));
        const __m512i bit_k = _mm512_set1_epi32(0x08040201);
        const __m512i bits = _mm512_srli_epi32(qh, 4 * j);
        const __m512i sixteen = _mm512_set1_epi8(16);
        lo = _mm512_mask_add_epi8(
            lo, _mm512_test_epi8_mask(_mm512_shuffle_epi8(bits, byte0), bit_k), lo, sixteen);
        hi = _mm512_mask_add_epi8(
            hi, _mm512_test_epi8_mask(_mm512_shuffle_epi8(bits, byte2), bit_k), hi, sixteen);
    }
}

// The group of rows r0..r0+15 (stored from row r0's address) times tokens t0..t0+T-1.
template <Type W, int T>
void tile(const MatmulArgs& a, std::int64_t r0, std::int64_t t0) {
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const std::uint8_t* group = a.weights + static_cast<std::size_t>(r0) * a.row_bytes;
    const auto nb = static_cast<std::size_t>(a.n / 32);
    const TokenRows<T> acts(a, t0);
    const std::uint8_t* end = prefetch_end(a);
    constexpr int kIntOffset = kQ32IntegerOffset<W>;
    __m512 f[1][T];
    for (int t = 0; t < T; ++t) f[0][t] = _mm512_setzero_ps();
#pragma GCC unroll 1
    for (std::size_t b = 0; b < nb; ++b) {
        const std::uint8_t* block = group + b * kLayout.bytes;
        prefetch_ahead(block, kLayout.bytes, end, a.prefetch_level);
        [[maybe_unused]] __m512i qh = _mm512_setzero_si512();
        if constexpr (kLayout.has_high_bits()) qh = both_halves(block + kLayout.high_bits, 32);
        __m512i acc[T];
        for (int t = 0; t < T; ++t) {
            acc[t] =
                kIntOffset != 0
                    ? _mm512_set1_epi32(-kIntOffset * acts.isum(t, static_cast<std::int64_t>(b)))
                    : _mm512_setzero_si512();
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            __m512i lo, hi;
            nibble_words<W>(block, j, qh, lo, hi);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m512i xlo = broadcast4<__m512i>(acts.q[t] + 32 * b + 4 * j);
                const __m512i xhi = broadcast4<__m512i>(acts.q[t] + 32 * b + 16 + 4 * j);
                acc[t] = _mm512_dpbusd_epi32(acc[t], lo, xlo);
                acc[t] = _mm512_dpbusd_epi32(acc[t], hi, xhi);
            }
        }
        const __m512 d = half16(block + kLayout.scales);
        for (int t = 0; t < T; ++t) {
            const __m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(acts.d[t][b]));
            f[0][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), scale, f[0][t]);
        }
        if constexpr (kLayout.has_mins()) {
            const __m512 m = half16(block + kLayout.mins);
            for (int t = 0; t < T; ++t)
                f[0][t] = _mm512_fmadd_ps(m, _mm512_set1_ps(acts.s[t][b]), f[0][t]);
        }
    }
    store_tile_rows(a, f, r0, kGroupRows, t0);
}

template <Type W>
void run_groups(const MatmulArgs& a) {
    for_groups_in_even_token_tiles<kTileTokens>(a, kGroupRows,
                                                [&](std::int64_t r, std::int64_t t0, auto tokens) {
                                                    tile<W, decltype(tokens)::value>(a, r, t0);
                                                });
}

}  // namespace

bool matmul_interleaved_q32_avx512(const MatmulArgs& a) {
    switch (a.type) {
        case Type::Q4_0:
            run_groups<Type::Q4_0>(a);
            return true;
        case Type::Q4_1:
            run_groups<Type::Q4_1>(a);
            return true;
        case Type::Q5_0:
            run_groups<Type::Q5_0>(a);
            return true;
        case Type::Q5_1:
            run_groups<Type::Q5_1>(a);
            return true;
        default:
            return false;
    }
}

}  // namespace tokenscope::tensor::detail
