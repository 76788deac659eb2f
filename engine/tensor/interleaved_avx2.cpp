// Weight rows stored interleaved (interleaved_rows.h: Q8_0, Q4_0-Q5_1) times a few tokens on
// AVX2: decode, speculative verification and batches under the lane GEMM's line (prefill over
// that takes the lane GEMM, whose packer reads the same layout; both compute the same bits).
// One group of 16 rows per tile (two registers of 8 rows) x up to 6 tokens (Q8_0) or 4 (Q4_0,
// Q4_1), reading the group's blocks as one stream and prefetching ahead of it as the row kernels
// do (kPrefetchAhead, MatmulArgs::prefetch_level).
//
// Per block b, row r (a lane) and token t, as in the lane GEMM (gemm_int8_q32_lanes.h):
//   f[r][t] = fma(float(sum_k u_r[k] * x_t[k]), d_r * d_t, f[r][t])
//   f[r][t] = fma(coef_r, s_t, f[r][t])             Q4_0 (coef = -8 d) and Q4_1 (coef = m)
// in block order, where the integer sum is exact:
//   * Q8_0: |q| times the activation with q's sign (vpabsb once per word, vpsignb per token),
//     pairs added by vpmaddubsw (at most 2 * 128 * 127), widened by vpmaddwd;
//   * Q4_0, Q4_1: the nibbles (0-15) times the activation; a block's eight vpmaddubsw results
//     add in int16 (at most 8 * 2 * 15 * 127 = 30480) and one vpmaddwd widens them;
//   * Q5_0, Q5_1: the codes (0-31), the vpmaddubsw results of words j and j + 4 added in int16
//     (at most 2 * 2 * 31 * 127 = 15748) and widened per pair.
// Every token count computes the same sequence per lane, so the results do not depend on how
// many tokens a call carries or where a tile starts (test_matmul).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/int8_lanes_avx2.h"
#include "tensor/interleaved_rows.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int H = 2;  // registers of 8 rows: a group of 16

// Tiles of 5 and 6 tokens: Q8_0 only (the nibble types hold 2 code registers per row group).
template <Type W>
constexpr bool kWideTiles = W == Type::Q8_0;
template <Type W>
constexpr int kMaxTileTokens = kWideTiles<W> ? 6 : 4;

// The group of rows r0..r0+15 times tokens t0..t0+T-1.
template <Type W, int T>
void tile(const MatmulArgs& a, std::int64_t r0, std::int64_t t0) {
    constexpr bool kQ8 = W == Type::Q8_0;
    const auto nb = static_cast<std::size_t>(a.n / 32);
    const TokenRows<T> acts(a, t0);
    constexpr InterleavedBlock kLayout = kInterleavedBlock<W>;
    const __m256i ones = _mm256_set1_epi16(1);
    const std::uint8_t* group = a.weights + static_cast<std::size_t>(r0) * a.row_bytes;
    const std::uint8_t* end = prefetch_end(a);
    __m256 f[H][T] = {};
#pragma GCC unroll 1
    for (std::size_t b = 0; b < nb; ++b) {
        const std::uint8_t* block = group + b * kLayout.bytes;
        prefetch_ahead(block, kLayout.bytes, end, a.prefetch_level);
        const std::uint8_t* codes[H] = {block, block + kLayout.codes};
        __m256i acc[H][T] = {};
        if constexpr (kQ8) {
#pragma GCC unroll 8
            for (int w = 0; w < 8; ++w) {
                const __m256i* word[H];
                __m256i magnitude[H];
                for (int h = 0; h < H; ++h) {
                    word[h] = reinterpret_cast<const __m256i*>(codes[h] +
                                                               32 * static_cast<std::size_t>(w));
                    magnitude[h] = _mm256_abs_epi8(_mm256_loadu_si256(word[h]));
                }
#pragma GCC unroll 6
                for (int t = 0; t < T; ++t) {
                    const __m256i x = broadcast4<__m256i>(acts.q[t] + 32 * b + 4 * w);
#pragma GCC unroll 2
                    for (int h = 0; h < H; ++h) {
                        const __m256i signed_x = _mm256_sign_epi8(x, _mm256_loadu_si256(word[h]));
                        acc[h][t] = _mm256_add_epi32(
                            acc[h][t],
                            _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude[h], signed_x), ones));
                    }
                }
            }
        } else {
            // Vector j of each half: words j and j + 4 (interleaved_nibble_words).
            [[maybe_unused]] __m256i fifth[H] = {};
            if constexpr (kLayout.has_high_bits()) {
                for (int h = 0; h < H; ++h)
                    fifth[h] = _mm256_loadu_si256(
                        reinterpret_cast<const __m256i*>(block + kLayout.high_bits + 32 * h));
            }
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                __m256i lo[H], hi[H];
                for (int h = 0; h < H; ++h)
                    interleaved_nibble_words<kLayout.has_high_bits()>(codes[h], j, fifth[h], lo[h],
                                                                      hi[h]);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    const __m256i xlo = broadcast4<__m256i>(acts.q[t] + 32 * b + 4 * j);
                    const __m256i xhi = broadcast4<__m256i>(acts.q[t] + 32 * b + 16 + 4 * j);
#pragma GCC unroll 2
                    for (int h = 0; h < H; ++h) {
                        if constexpr (kLayout.has_high_bits()) {
                            // Codes up to 31: the two words' pairs (up to 2 * 2 * 31 * 127) add
                            // in int16, then widen.
                            const __m256i pairs = _mm256_add_epi16(
                                _mm256_maddubs_epi16(lo[h], xlo), _mm256_maddubs_epi16(hi[h], xhi));
                            acc[h][t] = _mm256_add_epi32(acc[h][t], _mm256_madd_epi16(pairs, ones));
                        } else {
                            acc[h][t] =
                                _mm256_add_epi16(acc[h][t], _mm256_maddubs_epi16(lo[h], xlo));
                            acc[h][t] =
                                _mm256_add_epi16(acc[h][t], _mm256_maddubs_epi16(hi[h], xhi));
                        }
                    }
                }
            }
        }
        for (int h = 0; h < H; ++h) {
            const __m256 d = _mm256_cvtph_ps(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kLayout.scales + 16 * h)));
            for (int t = 0; t < T; ++t) {
                const __m256 scale = _mm256_mul_ps(d, _mm256_broadcast_ss(acts.d[t] + b));
                const __m256i sum =
                    kQ8 || kLayout.has_high_bits() ? acc[h][t] : _mm256_madd_epi16(acc[h][t], ones);
                f[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, f[h][t]);
            }
            if constexpr (!kQ8) {
                const __m256 coef =
                    kLayout.has_mins()
                        ? _mm256_cvtph_ps(_mm_loadu_si128(
                              reinterpret_cast<const __m128i*>(block + kLayout.mins + 16 * h)))
                        : _mm256_mul_ps(d,
                                        _mm256_set1_ps(kLayout.has_high_bits() ? -16.0f : -8.0f));
                for (int t = 0; t < T; ++t)
                    f[h][t] = _mm256_fmadd_ps(coef, _mm256_broadcast_ss(acts.s[t] + b), f[h][t]);
            }
        }
    }
    store_tile_rows(a, f, r0, static_cast<int>(kInterleavedGroupRows), t0);
}

template <Type W>
void run(const MatmulArgs& a) {
    for_groups_in_even_token_tiles<kMaxTileTokens<W>>(
        a, H * kLanes, [&](std::int64_t r, std::int64_t t0, auto tokens) {
            tile<W, decltype(tokens)::value>(a, r, t0);
        });
}

}  // namespace

bool matmul_interleaved_avx2(const MatmulArgs& a) {
    switch (a.type) {
        case Type::Q8_0:
            run<Type::Q8_0>(a);
            return true;
        case Type::Q4_0:
            run<Type::Q4_0>(a);
            return true;
        case Type::Q4_1:
            run<Type::Q4_1>(a);
            return true;
        case Type::Q5_0:
            run<Type::Q5_0>(a);
            return true;
        case Type::Q5_1:
            run<Type::Q5_1>(a);
            return true;
        default:
            return false;
    }
}

}  // namespace tokenscope::tensor::detail
