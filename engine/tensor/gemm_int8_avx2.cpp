// Prefill (16 tokens and more) for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) on AVX2: an
// integer register tile over the int8 activations (PreparedActivations' Q8_256 rows) whose
// 32-bit lanes are weight rows.
//
// Why not the f32 panels (gemm_panels_avx2.cpp) for these types: the panels decode every weight
// to f32 and are bounded by the FMA rate. pmaddubsw multiplies 32 byte pairs and pmaddwd folds
// in the sub-block scale; a register-only loop of pmaddubsw + pmaddwd + paddd ran 114 G
// multiply-adds/s on one core of the Zen 5 dev machine against 55 G for f32 FMAs (69-86 against
// 47 on a Zen 3).
//
// Why the lanes are rows: weight rows are interleaved in groups of 8, 4 bytes of each row next
// to each other, so one 256-bit register holds 4 consecutive elements of 8 rows. A token's 4
// activation bytes broadcast to every lane (a load, no shuffle) multiply all 8 rows at once, and
// each 32-bit lane then sums one row's products, so a tile's results come out as one vector per
// 8 rows and token: no horizontal sums, and the per-super-block float update (scale, offsets)
// costs one vector operation per 8 outputs instead of one per output. The earlier tile (lanes
// along k, 4 rows x 3 tokens, one accumulator register per output) spent about a fifth of its
// instructions on that update, and GCC kept 11 of its 12 accumulators on the stack. Measured
// with Q4_K, 128 tokens, one thread, as a ratio to the F16 panels run beside it (the machine's
// speed drifts): 1.14-1.20x before, 1.34-1.55x after (docs/benchmarks.md, issue 14).
//
// Per super-block b, row r and token t, in pack_k_row's terms (matmul_internal.h):
//   dot = d_r * d_a(t) * sum_j sc_r[j] * sum_k u_r[k] * q_a(t)[k] + sum_j coef_r[j] * s16_a(t)[j]
// (Q3_K: dot = d_r * d_a(t) * sum_j sc_r[j] * (sum_k u_r[k] * q_a(t)[k] - 4 isum_a(t)[j]), the
// offset in the integers; int8_lanes_avx2.h, q3_k_offset_pairs.)
// Each int32 lane adds, over the super-block, 64 groups of 4 products times the sub-block scale:
// at most 64 * 4 * 63 * 127 * 128 < 2^31 (Q6_K's u <= 63, |sc| <= 128), and pmaddubsw's pairs
// stay within 2 * 63 * 127 < 2^15. Every output is computed in its own lane by the same
// operations in the same order whatever rows share its group, so a split of the rows between
// threads gives the same bits.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/int8_lanes_avx2.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/pack_simd256.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int kRowRegs = 2;  // registers of rows per tile: 16 rows
constexpr int kGroupRows = kLanes * kRowRegs;
// 2 x 6 = 12 accumulators of the 16 registers. Measured against 2 x 5 and 1 x 8, 1 x 10, 1 x 12
// (one register of rows): 2 x 5 about as fast, one register 35-40 % slower.
constexpr int kTileTokens = 6;
constexpr int kSubBlocks = 16;  // 16-element sub-blocks (one scale each)

using InterleavedRows = InterleavedKRows<kGroupRows>;

// kRowRegs x 8 rows (interleaved in p), T tokens from t0; rows: how many of the group are real.
// kPairedOffsets (Q4_K, Q5_K): the offset terms come in equal pairs (one min per 32-element
// sub-block, stored for each half), so they are applied to the activation sums of 32 elements,
// 8 multiply-adds per super-block and output instead of 16. kIntegerOffsets (Q3_K): no offset
// terms, each sub-block's pairs gain q3_k_offset_pairs instead (int8_lanes_avx2.h).
template <int T, bool kPairedOffsets, int kWords, bool kIntegerOffsets>
void tile(const MatmulArgs& a, const InterleavedRows& p, std::int64_t r0, int rows,
          std::int64_t t0) {
    constexpr int H = kRowRegs;
    const TokenRows<T> acts(a, t0);
    __m256 f[H][T];
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) f[h][t] = _mm256_setzero_ps();
    }
    for (std::int64_t b = 0; b < p.nb; ++b) {
        const auto bi = static_cast<std::size_t>(b);
        // The offset terms come first in f's order (kquant_offset_update). Sixteen of them are
        // issued before the products, while the 12 integer sums are not live yet: after the
        // products, with f and the sums wanting 24 of the 16 registers, they spilled (Q2_K, 128
        // tokens, one thread: 194 -> 165 GFLOP/s). Q4_K/Q5_K's eight paired terms need the pair
        // sums and lost 2 % before the products, so they stay after them.
        const float* c = p.coef + bi * (InterleavedRows::kCoef / 4);
        const auto offsets = [&]() __attribute__((always_inline)) {
            kquant_offset_update<kPairedOffsets>(
                acts, b,
                [&](int j, int h) {
                    const int sub = kPairedOffsets ? 2 * j : j;  // the 16-element sub-block's term
                    return _mm256_load_ps(c + kLanes * h + kGroupRows * sub);
                },
                f);
        };
        if constexpr (!kPairedOffsets && !kIntegerOffsets) offsets();
        __m256i acc[H][T];
        for (int h = 0; h < H; ++h) {
            for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_si256();
        }
        const std::uint8_t* ub = p.u + bi * InterleavedRows::kU;
        const std::int16_t* sb = p.sc + bi * (InterleavedRows::kSc / 2);
#pragma GCC unroll 1
        for (int j = 0; j < kSubBlocks; ++j) {
            // kWords words of the sub-block at a time: their vpmaddubsw results add in int16
            // before the scale's vpmaddwd, one vpmaddwd per kWords words instead of one per
            // word on the multiply ports. A pair of products is at most 2 * 63 * 127 = 16002
            // for Q6_K's 6-bit codes (two words: 32004) and 2 * 31 * 127 = 7874 for Q5_K's
            // (four words, the whole sub-block: 31496).
#pragma GCC unroll 2
            for (int gg = 0; gg < 4; gg += kWords) {
                const int g = 4 * j + gg;
                __m256i w[kWords][H];
                for (int v = 0; v < kWords; ++v) {
                    for (int h = 0; h < H; ++h)
                        w[v][h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(
                            ub + (kGroupRows * (g + v) + kLanes * h) * 4));
                }
#pragma GCC unroll 6
                for (int t = 0; t < T; ++t) {
                    __m256i x[kWords];
                    for (int v = 0; v < kWords; ++v) {
                        x[v] = broadcast4<__m256i>(acts.q[t] + 256 * b + 4 * (g + v));
                        keep_in_order(x[v]);
                    }
#pragma GCC unroll 2
                    for (int h = 0; h < H; ++h) {
                        const auto* s = reinterpret_cast<const __m256i*>(
                            sb + (kGroupRows * j + kLanes * h) * 2);
                        __m256i pairs = _mm256_maddubs_epi16(w[0][h], x[0]);
                        for (int v = 1; v < kWords; ++v)
                            pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w[v][h], x[v]));
                        if constexpr (kIntegerOffsets) {
                            static_assert(kWords == 4);  // the whole sub-block's pairs
                            pairs = _mm256_add_epi16(
                                pairs, q3_k_offset_pairs(acts.offset16_low[t] + 16 * b + j));
                        }
                        __m256i sum = _mm256_add_epi32(
                            acc[h][t], _mm256_madd_epi16(pairs, _mm256_load_si256(s)));
                        keep_in_order(sum);
                        acc[h][t] = sum;
                    }
                }
            }
        }
        if constexpr (kPairedOffsets) offsets();
        kquant_scale_update(
            acts, b, acc, [&](int h) { return _mm256_load_ps(p.d + bi * kGroupRows + kLanes * h); },
            f);
    }
    store_tile_rows(a, f, r0, rows, t0);
}

template <bool kPairedOffsets, int kWords, bool kIntegerOffsets = false>
void k_gemm(const MatmulArgs& a) {
    thread_local InterleavedRows packed[kMaxPassGroups];
    for_lane_groups<kTileTokens>(
        a, kGroupRows, packed,
        [&](auto tokens, const InterleavedRows& p, std::int64_t r, int rows, std::int64_t t0) {
            tile<decltype(tokens)::value, kPairedOffsets, kWords, kIntegerOffsets>(a, p, r, rows,
                                                                                   t0);
        });
}

}  // namespace

bool gemm_int8_avx2(const MatmulArgs& args) {
    switch (args.type) {
        case Type::Q4_K:
        case Type::Q5_K:
            k_gemm<true, 4>(args);
            return true;
        case Type::Q2_K:
            k_gemm<false, 4>(args);
            return true;
        case Type::Q3_K:
            k_gemm<false, 4, kQ3KIntegerOffsets<Type::Q3_K>>(args);
            return true;
        case Type::Q6_K:
            k_gemm<false, 2>(args);
            return true;
        default:
            return false;
    }
}

}  // namespace tokenscope::tensor::detail
