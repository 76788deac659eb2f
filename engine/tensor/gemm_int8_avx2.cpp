// Prefill (16 tokens and more) for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) on AVX2: an
// integer register tile of 4 weight rows x 3 tokens over the int8 activations
// (PreparedActivations' Q8_256 rows).
//
// Why not the f32 panels (gemm_panels_avx2.cpp) for these types: the panels decode every weight
// to f32 and are bounded by the FMA rate (measured with a register-only loop on this Zen 3:
// 47 G multiply-adds/s on one core). pmaddubsw multiplies 32 byte pairs and pmaddwd folds in
// the sub-block scale; the same kind of loop ran 69-86 G multiply-adds/s. The direct decode
// kernels (dot_avx2.cpp) use those instructions one row at a time, so every row re-reads the
// activations and re-does the per-token work; here each weight vector serves 3 tokens and each
// activation vector 4 rows. Measured (1024 x 2816, 128 tokens, one thread, best of 40 by thread
// CPU time, four alternated rounds): 80-91 GFLOP/s against the panels' 75-81 for every K-quant.
// The tile does not reach the loop's rate: GCC keeps about half of the 12 accumulators on the
// stack, and each super-block ends in a float update of all 12 outputs.
//
// Per super-block b of row r and token t, in pack_k_row's terms (matmul_internal.h):
//   dot = d_r * d_a(t) * sum_j sc_r[j] * sum_k u_r[k] * q_a(t)[k] + sum_j coef_r[j] * s16_a(t)[j]
// The integer sums stay in 8 int32 lanes per (row, token) for the super-block: each lane adds
// 8 chunks x 4 products x the scale, at most 8 * 4 * 63 * 127 * 128 < 2^31 (Q6_K's u <= 63 and
// |sc| <= 128), and pmaddubsw's pairs stay within 2 * 63 * 127 < 2^15. Then they are converted
// and added, with the offset/min terms, into float lanes kept in a small stack array (12 more
// vector registers do not exist), and the lanes are summed once per output.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/pack_simd256.h"

namespace tokenscope::tensor::detail {

namespace {

// 4 x 3: of 4x3, 3x3, 4x2 and 2x6 (a first Q4_K-only version, same measurement, one round:
// 82-85, 69-87, 73-78 and 36-47 GFLOP/s), the fastest and steadiest.
constexpr int kTileRows = 4;
constexpr int kTileTokens = 3;

// A group of up to kTileRows weight rows in pack_k_row's form (matmul_internal.h), packed once
// per call and then used by every token tile: unsigned element bytes u, per-pair sub-block
// scales sc16 (exactly pmaddwd's second operand for a 32-element chunk), the super-block scale
// d and the 16 offset/min terms. Packing costs about what one token tile does, so 3 tokens of
// 128 repeat nothing; the tile's inner loop is then one load, pmaddubsw, pmaddwd and add per
// row, token and 32 elements, for every K-quant alike.
struct PackedRows {
    std::int64_t nb = 0;
    std::uint8_t* u = nullptr;     // [row][nb * 256]
    std::int16_t* sc16 = nullptr;  // [row][nb * 128]
    float* d = nullptr;            // [row][nb]
    float* coef = nullptr;         // [row][nb * 16]

    PackedRows() = default;
    PackedRows(const PackedRows&) = delete;
    PackedRows& operator=(const PackedRows&) = delete;
    ~PackedRows() { release(); }

    void pack(const MatmulArgs& a, std::int64_t r0, int rows) {
        nb = a.n / 256;
        const auto n = static_cast<std::size_t>(nb);
        // Every part a multiple of 64 bytes, so each starts aligned for the vector loads.
        const std::size_t u_bytes = kTileRows * n * 256, sc_bytes = kTileRows * n * 256;
        const std::size_t d_bytes = (kTileRows * n * sizeof(float) + 63) / 64 * 64;
        const std::size_t need = u_bytes + sc_bytes + d_bytes + kTileRows * n * 64;
        if (need > capacity_) {
            release();
            buffer_ = static_cast<std::uint8_t*>(::operator new[](need, std::align_val_t{64}));
            capacity_ = need;
        }
        u = buffer_;
        sc16 = reinterpret_cast<std::int16_t*>(buffer_ + u_bytes);
        d = reinterpret_cast<float*>(buffer_ + u_bytes + sc_bytes);
        coef = reinterpret_cast<float*>(buffer_ + u_bytes + sc_bytes + d_bytes);
        for (int r = 0; r < rows; ++r) {
            const auto i = static_cast<std::size_t>(r);
            pack_k_simd(a.type, a.weights + static_cast<std::size_t>(r0 + r) * a.row_bytes, nb,
                        u + i * n * 256, sc16 + i * n * 128, d + i * n, coef + i * n * 16);
        }
    }

  private:
    void release() {
        if (buffer_) ::operator delete[](buffer_, std::align_val_t{64});
        buffer_ = nullptr;
        capacity_ = 0;
    }
    std::uint8_t* buffer_ = nullptr;
    std::size_t capacity_ = 0;
};

// R rows (packed in p), T tokens from t0: every output of the tile, over the whole row length.
template <int R, int T>
void k_tile(const MatmulArgs& a, const PackedRows& p, std::int64_t r0, std::int64_t t0) {
    const TokenRows<T> acts(a, t0);
    const std::int64_t nb = p.nb;
    const auto row_u = static_cast<std::size_t>(nb) * 256;
    const auto row_sc = static_cast<std::size_t>(nb) * 128;
    alignas(32) float facc[R][T][8];
    for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) _mm256_store_ps(facc[r][t], _mm256_setzero_ps());
    }
    for (std::int64_t b = 0; b < nb; ++b) {
        __m256i acc[R][T];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
            for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_si256();
        }
        const std::uint8_t* ub = p.u + 256 * b;
        const std::int16_t* sb = p.sc16 + 128 * b;
        // Not unrolled: GCC then schedules all chunks' products ahead of their additions and
        // spills them (measured with the Q4_K-only first version: 400 stack accesses, 45
        // GFLOP/s, below the panels' 60).
#pragma GCC unroll 1
        for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const __m256i u = _mm256_load_si256(reinterpret_cast<const __m256i*>(
                    ub + static_cast<std::size_t>(r) * row_u + 32 * c));
                const __m256i* sc = reinterpret_cast<const __m256i*>(
                    sb + static_cast<std::size_t>(r) * row_sc + 16 * c);
#pragma GCC unroll 3
                for (int t = 0; t < T; ++t) {
                    const auto* x = reinterpret_cast<const __m256i*>(acts.q[t] + 256 * b + 32 * c);
                    acc[r][t] = _mm256_add_epi32(
                        acc[r][t],
                        _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_load_si256(x)), *sc));
                }
            }
        }
        // d_r * d_a(t) * (integer sum) + sum_j coef_r[j] * s16_a(t)[j], into the float lanes.
#pragma GCC unroll 3
        for (int t = 0; t < T; ++t) {
            const __m256 s_lo = _mm256_loadu_ps(acts.s[t] + 16 * b);
            const __m256 s_hi = _mm256_loadu_ps(acts.s[t] + 16 * b + 8);
            const __m256 da = _mm256_broadcast_ss(acts.d[t] + b);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const std::size_t i = static_cast<std::size_t>(r) * static_cast<std::size_t>(nb) +
                                      static_cast<std::size_t>(b);
                const float* coef = p.coef + 16 * i;
                __m256 f = _mm256_load_ps(facc[r][t]);
                f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][t]),
                                    _mm256_mul_ps(_mm256_broadcast_ss(p.d + i), da), f);
                f = _mm256_fmadd_ps(_mm256_load_ps(coef), s_lo, f);
                f = _mm256_fmadd_ps(_mm256_load_ps(coef + 8), s_hi, f);
                _mm256_store_ps(facc[r][t], f);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) {
            a.out[(t0 + t) * a.out_stride + r0 + r] = hsum(_mm256_load_ps(facc[r][t]));
        }
    }
}

template <int R>
void k_rows(const MatmulArgs& a, PackedRows& p, std::int64_t r0) {
    p.pack(a, r0, R);
    std::int64_t t0 = 0;
    for (; t0 + kTileTokens <= a.tokens; t0 += kTileTokens) k_tile<R, kTileTokens>(a, p, r0, t0);
    if (a.tokens - t0 == 2) k_tile<R, 2>(a, p, r0, t0);
    if (a.tokens - t0 == 1) k_tile<R, 1>(a, p, r0, t0);
}

// Row groups outermost: a group's packed rows (4 x 1.4 KB per 256 of width) stay in L1/L2
// while every token of the call passes over them; the activations come from L2 (matmul_rows
// blocks the tokens so that they fit).
void k_gemm(const MatmulArgs& a) {
    thread_local PackedRows packed;
    const std::uint8_t* w_end = a.weights + static_cast<std::size_t>(a.row_end) * a.row_bytes;
    std::int64_t r = a.row_begin;
    for (; r + kTileRows <= a.row_end; r += kTileRows) {
        prefetch_ahead(a.weights + static_cast<std::size_t>(r) * a.row_bytes,
                       kTileRows * a.row_bytes, w_end);
        k_rows<kTileRows>(a, packed, r);
    }
    switch (a.row_end - r) {
        case 3:
            k_rows<3>(a, packed, r);
            break;
        case 2:
            k_rows<2>(a, packed, r);
            break;
        case 1:
            k_rows<1>(a, packed, r);
            break;
        default:
            break;
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
