// Q8_0 rows stored interleaved (interleaved_rows.h) times a few tokens on AVX2: decode,
// speculative verification and small batches (under kPanelMinTokensInternal tokens; prefill
// takes the lane GEMM, whose packer reads the same layout). 16 rows per tile (two registers
// of 8 rows) x up to 6 tokens.
//
// Per block b, row r (a lane) and token t, as in the lane GEMM (gemm_int8_q32_lanes.h):
//   f[r][t] = fma(float(sum_k q_r[k] * x_t[k]), d_r * d_t, f[r][t])
// in block order, where the integer sum is exact: |q| times the activation with q's sign
// (vpabsb once per word, vpsignb per token), pairs added by vpmaddubsw (at most 2 * 128 * 127),
// widened by vpmaddwd. Every token count computes the same sequence per lane, so the results
// do not depend on how many tokens a call carries or where a tile starts: the same bits as the
// lane GEMM's for every token (test_matmul).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int kLanes = 8;
constexpr std::size_t kGroupBlockCodes = 8 * 32;  // one block of 8 rows' codes
constexpr int kMaxTileTokens = 6;

// H groups of 8 rows from r0 (H = 2, or 1 for a last group) times tokens t0..t0+T-1.
template <int H, int T>
void tile(const MatmulArgs& a, std::int64_t r0, std::int64_t t0) {
    const auto nb = static_cast<std::size_t>(a.n / 32);
    const TokenRows<T> acts(a, t0);
    const __m256i ones = _mm256_set1_epi16(1);
    const std::uint8_t* codes[H];
    const std::uint16_t* scales[H];
    for (int h = 0; h < H; ++h) {
        codes[h] = a.weights + static_cast<std::size_t>(r0 + kLanes * h) * a.row_bytes;
        scales[h] = reinterpret_cast<const std::uint16_t*>(codes[h] + nb * kGroupBlockCodes);
    }
    __m256 f[H][T];
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) f[h][t] = _mm256_setzero_ps();
    }
#pragma GCC unroll 1
    for (std::size_t b = 0; b < nb; ++b) {
        __m256i acc[H][T];
        for (int h = 0; h < H; ++h) {
            for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int w = 0; w < 8; ++w) {
            const __m256i* word[H];
            __m256i magnitude[H];
            for (int h = 0; h < H; ++h) {
                word[h] =
                    reinterpret_cast<const __m256i*>(codes[h] + b * kGroupBlockCodes + 32 * w);
                magnitude[h] = _mm256_abs_epi8(_mm256_loadu_si256(word[h]));
            }
#pragma GCC unroll 6
            for (int t = 0; t < T; ++t) {
                std::int32_t four;
                __builtin_memcpy(&four, acts.q[t] + 32 * b + 4 * w, 4);
                const __m256i x = _mm256_set1_epi32(four);
#pragma GCC unroll 2
                for (int h = 0; h < H; ++h) {
                    const __m256i signed_x = _mm256_sign_epi8(x, _mm256_loadu_si256(word[h]));
                    acc[h][t] = _mm256_add_epi32(
                        acc[h][t],
                        _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude[h], signed_x), ones));
                }
            }
        }
        for (int h = 0; h < H; ++h) {
            const __m256 d = _mm256_cvtph_ps(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales[h] + b * kLanes)));
            for (int t = 0; t < T; ++t) {
                const __m256 scale = _mm256_mul_ps(d, _mm256_broadcast_ss(acts.d[t] + b));
                f[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[h][t]), scale, f[h][t]);
            }
        }
    }
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t)
            _mm256_storeu_ps(a.out + (t0 + t) * a.out_stride + r0 + kLanes * h, f[h][t]);
    }
}

template <int H>
void tile_of(const MatmulArgs& a, std::int64_t r0, std::int64_t t0, int tokens) {
    switch (tokens) {
        case 1:
            return tile<H, 1>(a, r0, t0);
        case 2:
            return tile<H, 2>(a, r0, t0);
        case 3:
            return tile<H, 3>(a, r0, t0);
        case 4:
            return tile<H, 4>(a, r0, t0);
        case 5:
            return tile<H, 5>(a, r0, t0);
        default:
            return tile<H, 6>(a, r0, t0);
    }
}

}  // namespace

bool matmul_q8_0_x8_avx2(const MatmulArgs& a) {
    if (a.type != Type::Q8_0) return false;
    // Token tiles of at most 6, as even as possible (9 tokens: 5 + 4), so that no tile is a
    // lone token (2.4 cycles per (row, block) against about 2.0 for 4-6, Zen 3).
    const auto tiles = static_cast<int>((a.tokens + kMaxTileTokens - 1) / kMaxTileTokens);
    // Rows outermost: a 16-row group (10 KiB at 640 columns) stays in L1 for its later tiles.
    for (std::int64_t r = a.row_begin; r < a.row_end; r += 2 * kLanes) {
        std::int64_t t0 = 0;
        for (int i = 0; i < tiles; ++i) {
            const auto tokens = static_cast<int>((a.tokens - t0) / (tiles - i));
            if (a.row_end - r >= 2 * kLanes) {
                tile_of<2>(a, r, t0, tokens);
            } else {
                tile_of<1>(a, r, t0, tokens);
            }
            t0 += tokens;
        }
    }
    return true;
}

}  // namespace tokenscope::tensor::detail
