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
// Loop nest (per call, i.e. per thread's row range): blocks of 8 token groups (128 tokens,
// whose k-block of activations is 256 KiB and stays in L2) > blocks of kKC along k > 6-row
// panels of weights, decoded into a 12 KiB buffer that stays in L1 > token groups.
#include <immintrin.h>

#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/pack_simd256.h"

namespace tokenscope::tensor::detail {

namespace {

constexpr int kRowsPerTile = 6;
constexpr int kTokensPerGroup = 16;
constexpr std::int64_t kKC = 512;  // a multiple of 256, so k-blocks hold whole K-quant blocks
constexpr std::int64_t kGroupsPerBlock = 8;

// Integer offset stored in the packed weights (matmul_internal.h): the value is u - offset.
// Subtracting it as an integer keeps the decoded weight exact where folding it into a float
// coefficient (d * u - d * offset) would cancel.
constexpr int q32_offset(Type t) {
    return t == Type::Q8_0 ? 128 : t == Type::Q4_0 ? 8 : t == Type::Q5_0 ? 16 : 0;
}
constexpr int k_offset(Type t) {
    return t == Type::Q6_K ? 32 : t == Type::Q3_K ? 4 : 0;
}

// 8 unsigned bytes -> 8 floats u - offset.
inline __m256 bytes_to_f32(const std::uint8_t* u, __m256i offset) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(b), offset));
}

// Weights [k0, k0 + kc) of one row as f32 into dst. k0 and kc are whole blocks of the type.
struct RowDecoder {
    Type type;
    std::int64_t n;
    std::size_t row_bytes;
    alignas(64) std::uint8_t u[kKC];
    alignas(64) std::int16_t sc16[kKC / 2];
    alignas(64) float d[kKC / 32 + 16];
    alignas(64) float c[kKC / 16 + 16];

    void decode(const std::uint8_t* row, std::int64_t k0, std::int64_t kc, float* dst) {
        switch (type) {
            case Type::F16:
            case Type::BF16:
                decode_half(row, k0, kc, dst);
                return;
            case Type::Q4_0:
            case Type::Q4_1:
            case Type::Q5_0:
            case Type::Q5_1:
            case Type::Q8_0:
                decode_q32(row, k0, kc, dst);
                return;
            default:
                decode_k(row, k0, kc, dst);
                return;
        }
    }

    void decode_half(const std::uint8_t* row, std::int64_t k0, std::int64_t kc, float* dst) const {
        const std::uint8_t* src = row + 2 * k0;
        const std::int64_t full = kc / 8 * 8;
        for (std::int64_t k = 0; k < full; k += 8) {
            const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * k));
            const __m256 v =
                type == Type::F16
                    ? _mm256_cvtph_ps(h)
                    : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
            _mm256_store_ps(dst + k, v);
        }
        for (std::int64_t k = full; k < kc; ++k) {
            const auto bits = static_cast<std::uint16_t>(src[2 * k] | (src[2 * k + 1] << 8));
            if (type == Type::F16) {
                dst[k] = _cvtsh_ss(bits);
            } else {
                const std::uint32_t w = static_cast<std::uint32_t>(bits) << 16;
                std::memcpy(dst + k, &w, sizeof w);
            }
        }
    }

    void decode_q32(const std::uint8_t* row, std::int64_t k0, std::int64_t kc, float* dst) {
        const std::int64_t nb = kc / 32;
        const std::size_t block_bytes = row_bytes / static_cast<std::size_t>(n / 32);
        pack_q32_simd(type, row + static_cast<std::size_t>(k0 / 32) * block_bytes, nb, u, d, c);
        const int offset = q32_offset(type);
        const __m256i off = _mm256_set1_epi32(offset);
        for (std::int64_t b = 0; b < nb; ++b) {
            const __m256 scale = _mm256_set1_ps(d[b]);
            // Q4_1 / Q5_1 add their min (c); the offset types have it folded into u - offset.
            const __m256 add = _mm256_set1_ps(offset == 0 ? c[b] : 0.0f);
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                const __m256 v = bytes_to_f32(u + 32 * b + 8 * q, off);
                _mm256_store_ps(dst + 32 * b + 8 * q, _mm256_fmadd_ps(v, scale, add));
            }
        }
    }

    void decode_k(const std::uint8_t* row, std::int64_t k0, std::int64_t kc, float* dst) {
        const std::int64_t nb = kc / 256;
        const std::size_t block_bytes = row_bytes / static_cast<std::size_t>(n / 256);
        pack_k_simd(type, row + static_cast<std::size_t>(k0 / 256) * block_bytes, nb, u, sc16, d,
                    c);
        const int offset = k_offset(type);
        const __m256i off = _mm256_set1_epi32(offset);
        for (std::int64_t b = 0; b < nb; ++b) {
            for (int j = 0; j < 16; ++j) {
                const std::int64_t e = 256 * b + 16 * j;
                // sc16 holds each 16-element group's scale once per pair of elements.
                const __m256 scale = _mm256_set1_ps(d[b] * static_cast<float>(sc16[e / 2]));
                const __m256 add = _mm256_set1_ps(offset == 0 ? c[16 * b + j] : 0.0f);
                _mm256_store_ps(dst + e, _mm256_fmadd_ps(bytes_to_f32(u + e, off), scale, add));
                _mm256_store_ps(dst + e + 8,
                                _mm256_fmadd_ps(bytes_to_f32(u + e + 8, off), scale, add));
            }
        }
    }
};

// tile[i][j] = sum over k < kc of w[i * kKC + k] * p[16 k + j]: six weight rows times sixteen
// tokens, twelve accumulators, one broadcast per row and two activation loads per k.
void tile_6x16(const float* w, const float* p, std::int64_t kc,
               float (&tile)[kRowsPerTile][kTokensPerGroup]) {
    __m256 acc[kRowsPerTile][2];
#pragma GCC unroll 6
    for (int i = 0; i < kRowsPerTile; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (std::int64_t k = 0; k < kc; ++k) {
        const __m256 a0 = _mm256_load_ps(p + 16 * k);
        const __m256 a1 = _mm256_load_ps(p + 16 * k + 8);
#pragma GCC unroll 6
        for (int i = 0; i < kRowsPerTile; ++i) {
            const __m256 b = _mm256_broadcast_ss(w + i * kKC + k);
            acc[i][0] = _mm256_fmadd_ps(b, a0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(b, a1, acc[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < kRowsPerTile; ++i) {
        _mm256_storeu_ps(tile[i], acc[i][0]);
        _mm256_storeu_ps(tile[i] + 8, acc[i][1]);
    }
}

}  // namespace

bool gemm_panels_avx2(const MatmulArgs& a) {
    if (a.type == Type::F32 || a.panels == nullptr) return false;
    const std::int64_t groups = (a.tokens + kTokensPerGroup - 1) / kTokensPerGroup;
    RowDecoder decoder{a.type, a.n, a.row_bytes, {}, {}, {}, {}};
    alignas(64) float weights[kRowsPerTile * kKC];
    float tile[kRowsPerTile][kTokensPerGroup];
    for (std::int64_t g0 = 0; g0 < groups; g0 += kGroupsPerBlock) {
        const std::int64_t g1 = min_of(groups, g0 + kGroupsPerBlock);
        for (std::int64_t k0 = 0; k0 < a.n; k0 += kKC) {
            const std::int64_t kc = min_of(kKC, a.n - k0);
            for (std::int64_t r0 = a.row_begin; r0 < a.row_end; r0 += kRowsPerTile) {
                const int rows = static_cast<int>(min_of(kRowsPerTile, a.row_end - r0));
                for (int i = 0; i < kRowsPerTile; ++i) {
                    float* dst = weights + i * kKC;
                    if (i < rows) {
                        decoder.decode(a.weights + static_cast<std::size_t>(r0 + i) * a.row_bytes,
                                       k0, kc, dst);
                    } else {
                        std::memset(dst, 0, static_cast<std::size_t>(kc) * sizeof(float));
                    }
                }
                // The next panel's weight bytes are requested now, so they arrive while this
                // panel's tiles run (waiting for them at decode time cost ~10 % for F16).
                if (r0 + kRowsPerTile < a.row_end) {
                    const std::size_t bytes =
                        static_cast<std::size_t>(kc) * a.row_bytes / static_cast<std::size_t>(a.n);
                    const std::size_t skip =
                        static_cast<std::size_t>(k0) * a.row_bytes / static_cast<std::size_t>(a.n);
                    const int next_rows =
                        static_cast<int>(min_of(kRowsPerTile, a.row_end - r0 - kRowsPerTile));
                    for (int i = 0; i < next_rows; ++i) {
                        const std::uint8_t* p =
                            a.weights +
                            static_cast<std::size_t>(r0 + kRowsPerTile + i) * a.row_bytes + skip;
                        for (std::size_t o = 0; o < bytes; o += 64)
                            _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
                    }
                }
                for (std::int64_t g = g0; g < g1; ++g) {
                    tile_6x16(weights, a.panels + g * a.panel_group_stride + k0 * kTokensPerGroup,
                              kc, tile);
                    const int toks =
                        static_cast<int>(min_of(kTokensPerGroup, a.tokens - g * kTokensPerGroup));
                    for (int j = 0; j < toks; ++j) {
                        float* o = a.out + (g * kTokensPerGroup + j) * a.out_stride + r0;
                        for (int i = 0; i < rows; ++i)
                            o[i] = k0 == 0 ? tile[i][j] : o[i] + tile[i][j];
                    }
                }
            }
        }
    }
    return true;
}

}  // namespace tokenscope::tensor::detail
