// Prefill (many tokens) on AVX2 + FMA + F16C: a register-tiled f32 GEMM over weight rows
// decoded to f32 a block at a time and the activation panels of PreparedActivations (16 tokens
// transposed, see matmul.h).
//
// Why f32 and not the integer kernels: on AVX2 the dot-product tiles (dot_avx2.cpp) re-read the
// activations for every pair of weight rows and end in horizontal sums, and measured ~45 % of
// the FMA peak for F16 and ~60 % for the quantized types. Here one k step loads 16 tokens'
// activations as two vectors, broadcasts one weight per row of a 6-row tile and issues 12
// independent FMAs (the 6 x 16 outer product), so the FMA units, not loads or shuffles, bound
// the loop. Decoding a weight to f32 costs about one instruction per 8 weights and is paid once
// per 128 tokens, next to 128 multiply-adds per weight. The activations stay f32 (no int8
// rounding), so prefill is at least as exact as the integer path.
//
// The quantized types no longer come here: the int8 GEMMs whose lanes are weight rows
// (gemm_int8_avx2.cpp, gemm_int8_q32_avx2.cpp) run 1.2-1.5x faster than these panels. This file
// serves F16 and BF16, and the quantized types while TOKENSCOPE_INT8_GEMM=0.
//
// The loop nest and the weight decoder are shared with the AVX-512 panels (gemm_panels.h); this
// file holds the 256-bit register tile.
#include <immintrin.h>

#include "tensor/gemm_panels.h"

namespace tokenscope::tensor::detail {

namespace {

// Six weight rows times sixteen tokens: twelve accumulators, one broadcast per row and two
// activation loads per k.
struct Tile6x16 {
    static constexpr int kRows = 6;
    static constexpr int kGroups = 1;
    // Measured on Zen 4 (AVX2 forced) against whole 512-k blocks: 256 level to +4 %, 128 -7 % on
    // 2816 x 1024; this tile's 32 KiB of activations per 512 k evicts less of its 12 KiB panel.
    static constexpr std::int64_t kSubKC = 256;
    static void run(const float* w, const float* p, std::int64_t /*group_stride*/, int /*groups*/,
                    std::int64_t kc, bool accumulate, float (&tile)[kRows][kTokensPerGroup]) {
        __m256 acc[kRows][2];
#pragma GCC unroll 6
        for (int i = 0; i < kRows; ++i) {
            acc[i][0] = accumulate ? _mm256_loadu_ps(tile[i]) : _mm256_setzero_ps();
            acc[i][1] = accumulate ? _mm256_loadu_ps(tile[i] + 8) : _mm256_setzero_ps();
        }
        for (std::int64_t k = 0; k < kc; ++k) {
            const __m256 a0 = _mm256_load_ps(p + 16 * k);
            const __m256 a1 = _mm256_load_ps(p + 16 * k + 8);
#pragma GCC unroll 6
            for (int i = 0; i < kRows; ++i) {
                const __m256 b = _mm256_broadcast_ss(w + i * kWeightStride + k);
                acc[i][0] = _mm256_fmadd_ps(b, a0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(b, a1, acc[i][1]);
            }
        }
#pragma GCC unroll 6
        for (int i = 0; i < kRows; ++i) {
            _mm256_storeu_ps(tile[i], acc[i][0]);
            _mm256_storeu_ps(tile[i] + 8, acc[i][1]);
        }
    }
};

}  // namespace

bool gemm_panels_avx2(const MatmulArgs& a) {
    return gemm_panels<Tile6x16>(a);
}

}  // namespace tokenscope::tensor::detail
