// Q4_K rows stored interleaved (interleaved_rows.h) times a few tokens on AVX2: decode and
// speculative verification (under 16 tokens); prefill takes the K-quant lane GEMM
// (gemm_int8_avx2.cpp), whose packer reads the same groups (pack_q4_k_interleaved).
//
// The arithmetic is that GEMM's (kPairedOffsets, 4 words per pmaddwd), operation for operation,
// so every token count gives a token the same bits, and those of the GEMM over the file's rows
// (test_matmul). Per super-block b, row r (a lane) and token t:
//   acc     = sum over 16-element halves j of pmaddwd(sum of 4 pmaddubsw(u, x), (sc, sc))
//   f[r][t] = fma(float(acc), d_r * d_t, f[r][t])
//   f[r][t] = fma(-dmin_r * m_r[s], s_t[2s] + s_t[2s + 1], f[r][t])   for s = 0..7 in order
// where the integer sums are exact (the nibbles are at most 15, so four words' pairs add up to
// at most 4 * 2 * 15 * 127 in int16) and -dmin * m is an exact float product (an f16 times a
// 6-bit integer). Unlike the GEMM, which expands each call's rows to one byte per code first
// (about as long as a 16-token tile), the tile masks the stored nibbles itself and unpacks the
// 6-bit scales per super-block, so one token costs one pass over the stored bytes.
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
constexpr int kGroupRows = kLanes * H;
constexpr InterleavedBlock kLayout = kInterleavedBlock<Type::Q4_K>;
// 2 x 6 = 12 accumulators, as the lane GEMM.
constexpr int kTileTokens = 6;

// The group of 16 rows at `group` (rows r0..r0+15) times tokens t0..t0+T-1, asking for the
// stream ahead as the row kernels do.
template <int T>
void tile(const MatmulArgs& a, const std::uint8_t* group, std::int64_t r0, std::int64_t t0) {
    const auto nb = static_cast<std::size_t>(a.n / 256);
    const TokenRows<T> acts(a, t0);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const std::uint8_t* end = a.weights + static_cast<std::size_t>(a.row_end) * a.row_bytes;
    Q4KGroupScales s;
    __m256 f[H][T];
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) f[h][t] = _mm256_setzero_ps();
    }
#pragma GCC unroll 1
    for (std::size_t b = 0; b < nb; ++b) {
        const std::uint8_t* block = group + b * kLayout.bytes;
        prefetch_ahead(block, kLayout.bytes, end, a.prefetch_level);
        unpack_q4_k_group_scales(block, s);
        __m256i acc[H][T];
        for (int h = 0; h < H; ++h) {
            for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_si256();
        }
        // Chunk c (64 elements): its 8 words' low nibbles are sub-block 2c, high ones 2c + 1.
#pragma GCC unroll 1
        for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 2
            for (int high = 0; high < 2; ++high) {
                const int sb = 2 * c + high;
#pragma GCC unroll 2
                for (int gg = 0; gg < 8; gg += 4) {
                    __m256i w[4][H];
                    for (int v = 0; v < 4; ++v) {
                        for (int h = 0; h < H; ++h) {
                            const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                block + h * kLayout.codes +
                                static_cast<std::size_t>(8 * c + gg + v) * 32));
                            w[v][h] =
                                _mm256_and_si256(high ? _mm256_srli_epi16(raw, 4) : raw, low4);
                        }
                    }
#pragma GCC unroll 6
                    for (int t = 0; t < T; ++t) {
                        __m256i x[4];
                        for (int v = 0; v < 4; ++v) {
                            x[v] =
                                broadcast4<__m256i>(acts.q[t] + 256 * b + 32 * sb + 4 * (gg + v));
                            keep_in_order(x[v]);
                        }
#pragma GCC unroll 2
                        for (int h = 0; h < H; ++h) {
                            __m256i pairs = _mm256_maddubs_epi16(w[0][h], x[0]);
                            for (int v = 1; v < 4; ++v)
                                pairs =
                                    _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w[v][h], x[v]));
                            __m256i sum =
                                _mm256_add_epi32(acc[h][t], _mm256_madd_epi16(pairs, s.sc[sb][h]));
                            keep_in_order(sum);
                            acc[h][t] = sum;
                        }
                    }
                }
            }
        }
        alignas(32) float pair_sums[T][8];
        for (int t = 0; t < T; ++t) sums_of_pairs16(acts.s[t] + 16 * b, pair_sums[t]);
        for (int h = 0; h < H; ++h) {
            for (int t = 0; t < T; ++t) {
                const __m256 scale = _mm256_mul_ps(s.d[h], _mm256_broadcast_ss(acts.d[t] + b));
                f[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[h][t]), scale, f[h][t]);
            }
            for (int j = 0; j < kQ4KSubBlocks; ++j) {
                for (int t = 0; t < T; ++t)
                    f[h][t] = _mm256_fmadd_ps(s.coef[j][h], _mm256_broadcast_ss(&pair_sums[t][j]),
                                              f[h][t]);
            }
        }
    }
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t)
            _mm256_storeu_ps(a.out + (t0 + t) * a.out_stride + r0 + kLanes * h, f[h][t]);
    }
}

void tile_of(const MatmulArgs& a, const std::uint8_t* group, std::int64_t r0, std::int64_t t0,
             int tokens) {
    switch (tokens) {
        case 1:
            return tile<1>(a, group, r0, t0);
        case 2:
            return tile<2>(a, group, r0, t0);
        case 3:
            return tile<3>(a, group, r0, t0);
        case 4:
            return tile<4>(a, group, r0, t0);
        case 5:
            return tile<5>(a, group, r0, t0);
        default:
            return tile<6>(a, group, r0, t0);
    }
}

const std::uint8_t* group_at(const MatmulArgs& a, std::int64_t r) {
    return a.weights + static_cast<std::size_t>(r) * a.row_bytes;
}

// Under 16 tokens: groups outermost (a group of 1024-wide rows, 9 KiB, stays in L1
// for its later tiles), token tiles as even as possible so that none is a lone token.
void run_few(const MatmulArgs& a) {
    const auto tiles = static_cast<int>((a.tokens + kTileTokens - 1) / kTileTokens);
    for (std::int64_t r = a.row_begin; r < a.row_end; r += kGroupRows) {
        std::int64_t t0 = 0;
        for (int i = 0; i < tiles; ++i) {
            const auto tokens = static_cast<int>((a.tokens - t0) / (tiles - i));
            tile_of(a, group_at(a, r), r, t0, tokens);
            t0 += tokens;
        }
    }
}

}  // namespace

bool matmul_interleaved_kquant_avx2(const MatmulArgs& a) {
    if (a.type != Type::Q4_K) return false;
    // From 16 tokens the lane GEMM, its packer expanding the stored nibbles to bytes: one
    // thread, Zen 3, 2816 x 1024, cycles per (token, row, 32 elements), lane GEMM / this tile:
    // 16 tokens 1.36 / 1.33, 24 1.20 / 1.24, 40 1.14 / 1.25, 128 1.10 / 1.27.
    if (a.tokens >= kPanelMinTokensInternal) return gemm_int8_avx2(a);
    run_few(a);
    return true;
}

}  // namespace tokenscope::tensor::detail
