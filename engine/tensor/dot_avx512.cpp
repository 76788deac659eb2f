// AVX-512 kernels (F, BW, VL, DQ, VNNI). Compiled with those instruction sets and called only
// when the CPU has them (simd_dispatch.cpp).
//
// 32-block formats: one zmm holds two blocks of unsigned weights u and signed activations q;
// vpdpbusd sums u*q in groups of 4 into 16 int32 lanes (8 per block), which are converted and
// scaled by the two blocks' d_w * d_a in one fma. The offset/min term of each block is a float
// dot of the per-block coef and activation sums (matmul_internal.h), one fma per 16 blocks.
//
// K-quants: pmaddubsw gives u*q in pairs as int16 (never saturates: u <= 63), vpdpwssd
// multiplies those by the sub-block's integer scale and accumulates int32 across the whole
// 256-element super-block, so the float scale is applied once per super-block, not per
// sub-block: two integer instructions per 64 weights and token.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's _mm512_undefined_*() (used inside cvtepi32_ps, cvtph_ps, permutexvar...) reads a
// self-initialized variable and trips -Wmaybe-uninitialized (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/pack_simd256.h"

namespace tokenscope::tensor::detail {

namespace {

inline float hsum(__m512 v) {
    return _mm512_reduce_add_ps(v);
}

// [p[0] x 8, p[1] x 8]: the scales of two consecutive blocks, lined up with their lanes.
inline __m512 two_scales(const float* p) {
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m128 pair = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)));
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(pair));
}

struct Q32Avx512 {
    // 4 x 4 tile: 16 accumulators + 4 weight vectors + 4 weight-scale vectors in 32 zmm.
    static constexpr int kRows = 4;
    static constexpr int kTokens = 4;
    static void pack(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                     float* d, float* c) {
        pack_q32_simd(type, blocks, nb, u, d, c);
    }
    template <int R, int T>
    static void tile(Q32Tile<kRows, kTokens>& t) {
        __m512 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
        }
        const std::int64_t pairs = t.len / 64;
        for (std::int64_t p = 0; p < pairs; ++p) {
            __m512i w[R];
            __m512 wd[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                w[i] = _mm512_load_si512(t.wu[i] + 64 * p);
                wd[i] = two_scales(t.wd[i] + 2 * p);
            }
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j) {
                const __m512i a = _mm512_load_si512(t.aq[j] + 64 * p);
                const __m512 ad = two_scales(t.ad[j] + 2 * p);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[i], a);
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd[i], ad),
                                                acc[i][j]);
                }
            }
        }
        const std::int64_t nb_pad = round_up_to(t.len / 32, 16);
        for (std::int64_t b = 0; b < nb_pad; b += 16) {
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                const __m512 c = _mm512_load_ps(t.wc[i] + b);
#pragma GCC unroll 4
                for (int j = 0; j < T; ++j) {
                    acc[i][j] = _mm512_fmadd_ps(c, _mm512_loadu_ps(t.as[j] + b), acc[i][j]);
                }
            }
        }
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) t.res[i][j] = hsum(acc[i][j]);
        }
    }
};

struct KAvx512 {
    // 4 x 3 tile: 12 int32 super-block sums + 12 float accumulators.
    static constexpr int kRows = 4;
    static constexpr int kTokens = 3;
    static void pack(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                     std::int16_t* sc, float* d, float* c) {
        pack_k_simd(type, blocks, nb, u, sc, d, c);
    }
    template <int R, int T>
    static void tile(KTile<kRows, kTokens>& t) {
        __m512 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
        }
        const std::int64_t blocks = t.len / 256;
        for (std::int64_t b = 0; b < blocks; ++b) {
            __m512i isum[R][T];
            for (int i = 0; i < R; ++i) {
                for (int j = 0; j < T; ++j) isum[i][j] = _mm512_setzero_si512();
            }
#pragma GCC unroll 4
            for (int g = 0; g < 4; ++g) {
                const std::int64_t off = 256 * b + 64 * g;
                __m512i a[T];
#pragma GCC unroll 4
                for (int j = 0; j < T; ++j) a[j] = _mm512_load_si512(t.aq[j] + off);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m512i w = _mm512_load_si512(t.wu[i] + off);
                    const __m512i sc = _mm512_load_si512(t.wsc[i] + off / 2);
#pragma GCC unroll 4
                    for (int j = 0; j < T; ++j) {
                        isum[i][j] =
                            _mm512_dpwssd_epi32(isum[i][j], _mm512_maddubs_epi16(w, a[j]), sc);
                    }
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < T; ++j) {
                const __m512 ad = _mm512_set1_ps(t.ad[j][b]);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(t.wd[i][b]), ad);
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][j]), scale, acc[i][j]);
                }
            }
        }
        for (std::int64_t s = 0; s < t.len / 16; s += 16) {
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                const __m512 c = _mm512_load_ps(t.wc[i] + s);
#pragma GCC unroll 4
                for (int j = 0; j < T; ++j) {
                    acc[i][j] = _mm512_fmadd_ps(c, _mm512_loadu_ps(t.as[j] + s), acc[i][j]);
                }
            }
        }
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) t.res[i][j] = hsum(acc[i][j]);
        }
    }
};

template <Type W>
inline __m512 load16(const std::uint8_t* row, std::int64_t k) {
    if constexpr (W == Type::F32) {
        return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
    } else if constexpr (W == Type::F16) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
    } else {
        const __m512i h = _mm512_cvtepu16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));  // bf16 is a float's top half
    }
}

// The last n % 16 elements; lanes past the row end read nothing and are zero.
template <Type W>
inline __m512 load16_masked(const std::uint8_t* row, std::int64_t k, __mmask16 m) {
    if constexpr (W == Type::F32) {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
    } else if constexpr (W == Type::F16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * k));
    } else {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * k));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
}

template <Type W>
struct FAvx512 {
    // 4 x 5: 20 accumulators + 4 weight vectors; the F16/BF16 conversion (2 uops) of each
    // weight vector is shared by 5 tokens.
    static constexpr int kRows = 4;
    static constexpr int kTokens = 5;
    template <int R, int T>
    static void tile(FTile<kRows, kTokens>& t) {
        __m512 acc[R][T];
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
        }
        const std::int64_t full = t.n / 16 * 16;
        for (std::int64_t k = 0; k < full; k += 16) {
            __m512 w[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) w[i] = load16<W>(t.w[i], k);
#pragma GCC unroll 5
            for (int j = 0; j < T; ++j) {
                const __m512 a = _mm512_load_ps(t.a[j] + k);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(w[i], a, acc[i][j]);
            }
        }
        if (full < t.n) {
            const auto m = static_cast<__mmask16>((1u << (t.n - full)) - 1u);
            for (int i = 0; i < R; ++i) {
                const __m512 w = load16_masked<W>(t.w[i], full, m);
                // Activation rows are zero-padded to 16 floats, so a full load is safe.
                for (int j = 0; j < T; ++j) {
                    acc[i][j] = _mm512_fmadd_ps(w, _mm512_load_ps(t.a[j] + full), acc[i][j]);
                }
            }
        }
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) t.res[i][j] = hsum(acc[i][j]);
        }
    }
};

}  // namespace

bool matmul_avx512(const MatmulArgs& args) {
    switch (args.type) {
        case Type::F32:
            run_f<FAvx512<Type::F32>>(args);
            return true;
        case Type::F16:
            run_f<FAvx512<Type::F16>>(args);
            return true;
        case Type::BF16:
            run_f<FAvx512<Type::BF16>>(args);
            return true;
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
        case Type::Q8_0:
            run_q32<Q32Avx512>(args);
            return true;
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
            run_k<KAvx512>(args);
            return true;
    }
    return false;
}

}  // namespace tokenscope::tensor::detail
