// F16 and BF16 prefill (16 tokens or more) on AVX-512: the f32 panels of gemm_panels.h with a
// 512-bit register tile of 12 weight rows x 32 tokens (two 16-token groups, one vector each).
//
// Why not the row tile it replaces (run_f_widened in dot_avx512.cpp, 4 rows x 5 tokens, each
// accumulator a vector of partial sums along k): that tile re-reads five tokens' activation
// rows for every four weight rows, and once a row is 2816 floats wide (a down projection) the
// five rows outgrow L1 and every step waits on L2: one thread, 128 tokens, 1024 x 2816 ran at
// 89-93 GFLOP/s against an FMA peak of about 156. Here one k step loads two activation vectors
// (32 tokens of one k, streaming from L2), broadcasts one weight per row from a 24 KiB decoded
// panel in L1 and issues 24 independent FMAs, so the FMA ports bound the loop.
//
// The summation order is gemm_panels.h's, so results equal the AVX2 panels' bit for bit.
//
// One thread, Intel Xeon (family 6, model 0xCF), best of three alternated runs, GFLOP/s, row
// tile -> panels: 2816 x 1024 at 128 / 512 tokens 126 / 123 -> 137 / 128; 1024 x 2816 93 / 93
// -> 124 / 126; 1024 x 1024 126 / 125 -> 126 / 125. Tiles of 8 x 48, 6 x 64 and 24 x 16
// measured within the noise of 12 x 32.
#include <immintrin.h>

#include "tensor/gemm_panels.h"

namespace tokenscope::tensor::detail {

namespace {

struct Tile12x32 {
    static constexpr int kRows = 12;
    static constexpr int kGroups = 2;
    // Two groups' activations for 128 k are 16 KiB, the panel's 12 rows 6 KiB: both fit in L1.
    // One thread, this Zen 4, F16, 128 tokens, medians of 5-6 alternated runs against whole
    // 512-k blocks: 2816 x 1024 +5 %, 1024 x 2816 +5-7 %, 1536 x 1024 +6 %.
    static constexpr std::int64_t kSubKC = 128;
    static void run(const float* w, const float* p, std::int64_t group_stride, int groups,
                    std::int64_t kc, bool accumulate,
                    float (&tile)[kRows][kGroups * kTokensPerGroup]) {
        if (groups == kGroups) {
            run_groups<2>(w, p, group_stride, kc, accumulate, tile);
        } else {
            run_groups<1>(w, p, group_stride, kc, accumulate, tile);
        }
    }

    template <int G>
    static void run_groups(const float* w, const float* p, std::int64_t group_stride,
                           std::int64_t kc, bool accumulate,
                           float (&tile)[kRows][kGroups * kTokensPerGroup]) {
        __m512 acc[kRows][G];
#pragma GCC unroll 12
        for (int i = 0; i < kRows; ++i) {
            for (int g = 0; g < G; ++g)
                acc[i][g] = accumulate ? _mm512_loadu_ps(tile[i] + 16 * g) : _mm512_setzero_ps();
        }
        const float* p1 = p + (G > 1 ? group_stride : 0);
        for (std::int64_t k = 0; k < kc; ++k) {
            const __m512 a0 = _mm512_load_ps(p + 16 * k);
            const __m512 a1 = G > 1 ? _mm512_load_ps(p1 + 16 * k) : a0;
#pragma GCC unroll 12
            for (int i = 0; i < kRows; ++i) {
                const __m512 b = _mm512_set1_ps(w[i * kWeightStride + k]);
                acc[i][0] = _mm512_fmadd_ps(b, a0, acc[i][0]);
                if constexpr (G > 1) acc[i][1] = _mm512_fmadd_ps(b, a1, acc[i][1]);
            }
        }
#pragma GCC unroll 12
        for (int i = 0; i < kRows; ++i) {
            for (int g = 0; g < G; ++g) _mm512_storeu_ps(tile[i] + 16 * g, acc[i][g]);
        }
    }
};

}  // namespace

bool gemm_panels_avx512(const MatmulArgs& a) {
    // The quantized types have int8 GEMMs at this level; the panels serve the half formats.
    if (a.type != Type::F16 && a.type != Type::BF16) return false;
    return gemm_panels<Tile12x32>(a);
}

}  // namespace tokenscope::tensor::detail
