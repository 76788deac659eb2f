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
// Each int32 lane adds, over the super-block, 64 groups of 4 products times the sub-block scale:
// at most 64 * 4 * 63 * 127 * 128 < 2^31 (Q6_K's u <= 63, |sc| <= 128), and pmaddubsw's pairs
// stay within 2 * 63 * 127 < 2^15. Every output is computed in its own lane by the same
// operations in the same order whatever rows share its group, so a split of the rows between
// threads gives the same bits.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

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
constexpr int kGroupsPerBlock = 256 / 4;  // 4-element groups per super-block
constexpr int kSubBlocks = 16;            // 16-element sub-blocks (one scale each)

// Up to kGroupRows weight rows interleaved for the tile, packed once per call and then used by
// every token tile. Per super-block b and register h (rows 8h..8h+7):
//   u:    [b][h][group 0..63][row 0..7][4 bytes]      2048 bytes
//   sc:   [b][h][sub-block 0..15][row 0..7][2 x int16] 512 bytes (pmaddwd's operand)
//   d:    [b][h][row 0..7]                            super-block scales
//   coef: [b][h][sub-block 0..15][row 0..7]           offset / min terms
// Rows past the end are zero everywhere, so their lanes compute 0.
struct InterleavedRows {
    std::int64_t nb = 0;
    std::uint8_t* u = nullptr;
    std::int16_t* sc = nullptr;
    float* d = nullptr;
    float* coef = nullptr;

    static constexpr std::size_t kU = 2048, kSc = 512, kD = 32, kCoef = 512;  // per (b, h)

    void pack(const MatmulArgs& a, std::int64_t r0, int rows) {
        nb = a.n / 256;
        const auto n = static_cast<std::size_t>(nb);
        const std::size_t per_b = kRowRegs * (kU + kSc + kD + kCoef);
        // pack_k_simd's arrays for 8 rows: u, sc16, d, coef.
        const std::size_t row_u = n * 256, row_sc = n * 128, row_c = n * 16;
        const std::size_t tmp_bytes = kLanes * (row_u + 2 * row_sc + 4 * n + 4 * row_c);
        const std::size_t need = n * per_b + tmp_bytes;
        u = buffer_.get(need);
        sc = reinterpret_cast<std::int16_t*>(u + n * kRowRegs * kU);
        d = reinterpret_cast<float*>(reinterpret_cast<std::uint8_t*>(sc) + n * kRowRegs * kSc);
        coef = d + n * kRowRegs * kD / sizeof(float);
        auto* tu = reinterpret_cast<std::uint8_t*>(coef + n * kRowRegs * kCoef / 4);
        auto* tsc = reinterpret_cast<std::int16_t*>(tu + kLanes * row_u);
        auto* tc = reinterpret_cast<float*>(tsc + kLanes * row_sc);
        auto* td = tc + kLanes * row_c;
        for (int h = 0; h < kRowRegs; ++h) {
            const int here = static_cast<int>(min_of(kLanes, rows - kLanes * h));
            if (here < kLanes) std::memset(tu, 0, tmp_bytes);  // missing rows: all zero
            for (int r = 0; r < here; ++r) {
                const auto i = static_cast<std::size_t>(r);
                pack_k_simd(a.type,
                            a.weights + static_cast<std::size_t>(r0 + kLanes * h + r) * a.row_bytes,
                            nb, tu + i * row_u, tsc + i * row_sc, td + i * n, tc + i * row_c);
            }
            for (std::size_t b = 0; b < n; ++b) {
                const std::size_t bh = b * kRowRegs + static_cast<std::size_t>(h);
                for (int c = 0; c < 8; ++c)
                    interleave_rows32(tu + 256 * b + 32 * c, row_u, u + bh * kU + 256 * c);
                // A sub-block's scale is the same int16 pair all along sc16, so one 32-bit word
                // per row is the row's lane of pmaddwd's operand.
                std::int16_t* sb = sc + bh * (kSc / 2);
                float* cb = coef + bh * (kCoef / 4);
                for (int j = 0; j < kSubBlocks; ++j) {
                    for (int r = 0; r < kLanes; ++r) {
                        const auto i = static_cast<std::size_t>(r);
                        std::memcpy(sb + 16 * j + 2 * r, tsc + i * row_sc + 128 * b + 8 * j, 4);
                        cb[8 * j + r] = tc[i * row_c + 16 * b + static_cast<std::size_t>(j)];
                    }
                }
                for (int r = 0; r < kLanes; ++r)
                    d[bh * kLanes + static_cast<std::size_t>(r)] =
                        td[static_cast<std::size_t>(r) * n + b];
            }
        }
    }

  private:
    ScratchBuffer buffer_;
};

// kRowRegs x 8 rows (interleaved in p), T tokens from t0; rows: how many of the group are real.
template <int T>
void tile(const MatmulArgs& a, const InterleavedRows& p, std::int64_t r0, int rows,
          std::int64_t t0) {
    constexpr int H = kRowRegs;
    const TokenRows<T> acts(a, t0);
    __m256 f[H][T];
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) f[h][t] = _mm256_setzero_ps();
    }
    for (std::int64_t b = 0; b < p.nb; ++b) {
        __m256i acc[H][T];
        for (int h = 0; h < H; ++h) {
            for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_si256();
        }
        const auto bh0 = static_cast<std::size_t>(b * kRowRegs);
        const std::uint8_t* ub = p.u + bh0 * InterleavedRows::kU;
        const std::int16_t* sb = p.sc + bh0 * (InterleavedRows::kSc / 2);
#pragma GCC unroll 1
        for (int j = 0; j < kSubBlocks; ++j) {
#pragma GCC unroll 4
            for (int gg = 0; gg < 4; ++gg) {
                const int g = 4 * j + gg;
                __m256i w[H];
                for (int h = 0; h < H; ++h)
                    w[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(
                        ub + static_cast<std::size_t>(h) * InterleavedRows::kU + 32 * g));
#pragma GCC unroll 6
                for (int t = 0; t < T; ++t) {
                    __m256i x = broadcast4(acts.q[t] + 256 * b + 4 * g);
                    keep_in_order(x);
#pragma GCC unroll 2
                    for (int h = 0; h < H; ++h) {
                        const auto* s = reinterpret_cast<const __m256i*>(
                            sb + static_cast<std::size_t>(h) * (InterleavedRows::kSc / 2) + 16 * j);
                        __m256i sum = _mm256_add_epi32(
                            acc[h][t],
                            _mm256_madd_epi16(_mm256_maddubs_epi16(w[h], x), _mm256_load_si256(s)));
                        keep_in_order(sum);
                        acc[h][t] = sum;
                    }
                }
            }
        }
        for (int h = 0; h < H; ++h) {
            const __m256 dw = _mm256_load_ps(p.d + (bh0 + h) * kLanes);
            const float* c = p.coef + (bh0 + h) * (InterleavedRows::kCoef / 4);
            for (int t = 0; t < T; ++t) {
                const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(acts.d[t] + b));
                f[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[h][t]), scale, f[h][t]);
            }
            // Tokens innermost: T independent chains of 16 multiply-adds instead of one chain
            // at a time, which left the loop waiting on FMA latency (a fifth of the tile's
            // time, measured with perf).
            for (int j = 0; j < kSubBlocks; ++j) {
                const __m256 cj = _mm256_load_ps(c + 8 * j);
                for (int t = 0; t < T; ++t)
                    f[h][t] =
                        _mm256_fmadd_ps(cj, _mm256_broadcast_ss(acts.s[t] + 16 * b + j), f[h][t]);
            }
        }
    }
    for (int h = 0; h < H; ++h) {
        const int valid = rows - kLanes * h;
        if (valid <= 0) break;
        for (int t = 0; t < T; ++t) {
            store_lanes(a.out + (t0 + t) * a.out_stride + r0 + kLanes * h, f[h][t], valid);
        }
    }
}

template <int T>
void tail_tokens(const MatmulArgs& a, const InterleavedRows& p, std::int64_t r0, int rows,
                 std::int64_t t0, int left) {
    if constexpr (T > 0) {
        if (left == T) {
            tile<T>(a, p, r0, rows, t0);
            return;
        }
        tail_tokens<T - 1>(a, p, r0, rows, t0, left);
    }
}

// Row groups outermost: a group's interleaved rows (2.6 KB per 256 of width and 8 rows) stay in
// L2 while every token of the call passes over them; the activations come from L2 (matmul_rows
// blocks the tokens so that they fit).
void k_gemm(const MatmulArgs& a) {
    thread_local InterleavedRows packed;
    const std::uint8_t* w_end = a.weights + static_cast<std::size_t>(a.row_end) * a.row_bytes;
    for (std::int64_t r = a.row_begin; r < a.row_end; r += kGroupRows) {
        const int rows = static_cast<int>(min_of(kGroupRows, a.row_end - r));
        prefetch_ahead(a.weights + static_cast<std::size_t>(r) * a.row_bytes,
                       static_cast<std::size_t>(rows) * a.row_bytes, w_end);
        packed.pack(a, r, rows);
        std::int64_t t0 = 0;
        for (; t0 + kTileTokens <= a.tokens; t0 += kTileTokens)
            tile<kTileTokens>(a, packed, r, rows, t0);
        tail_tokens<kTileTokens - 1>(a, packed, r, rows, t0, static_cast<int>(a.tokens - t0));
    }
}

}  // namespace

bool gemm_int8_avx2(const MatmulArgs& args) {
    switch (args.type) {
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
            k_gemm(args);
            return true;
        default:
            return false;
    }
}

}  // namespace tokenscope::tensor::detail
