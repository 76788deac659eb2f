#pragma once
// The loop nest of the f32 prefill panels, shared by the AVX2 (gemm_panels_avx2.cpp) and
// AVX-512 (gemm_panels_avx512.cpp) kernels: weight rows decoded to f32 a k-block at a time, times
// the 16-token transposed activation groups of PreparedActivations (matmul.h), through a
// register tile that each file supplies. AVX2 + F16C instructions only, in an unnamed namespace
// like pack_simd256.h, so each including file gets its own copy compiled for its instruction set.
//
// Every output element is summed the same way whatever the tile: one chain of fused
// multiply-adds over each k-block of kKC in ascending k, starting from +0, and the blocks'
// sums added in order. The AVX2 and AVX-512 panels therefore agree bit for bit
// (test_matmul panelsAgreeAcrossInstructionSets).
//
// Loop nest (per call, i.e. per thread's row range): blocks of 8 token groups (128 tokens,
// whose k-block of activations is 256 KiB and stays in L2) > blocks of kKC along k > panels of
// Tile::kRows weight rows > sub-blocks of Tile::kSubKC along k, decoded into a buffer that stays
// in L1 > Tile::kGroups token groups at a time. A sub-block continues the FMA chains of the one
// before it (the tile keeps them), so sub-blocks change speed, not the sums; each panel and
// tile's k-block sums are added in a buffer and written to the output after the last k-block.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"
#include "tensor/pack_simd256.h"

namespace tokenscope::tensor::detail {
namespace {

constexpr int kTokensPerGroup = 16;
constexpr std::int64_t kKC = 512;  // a multiple of 256, so k-blocks hold whole K-quant blocks
constexpr std::int64_t kGroupsPerBlock = 8;
// Floats from one decoded weight row of a panel to the next: kKC plus one cache line, so that
// the rows' k-th weights fall into different L1 sets instead of two (rows 2 KiB apart).
constexpr std::int64_t kWeightStride = kKC + 16;

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

// Runs the loop nest above with Tile, which provides kRows, kGroups, kSubKC (the k of a
// sub-block, a multiple of 32 so that sub-blocks hold whole blocks of the 32-weight types) and
//   static void run(const float* w, const float* p, std::int64_t group_stride, int groups,
//                   std::int64_t kc, bool accumulate,
//                   float (&tile)[kRows][kGroups * kTokensPerGroup]);
// computing, for groups g < `groups` (1..kGroups),
//   tile[i][16 g + j] (+)= sum over k < kc of w[i * kWeightStride + k] * p[g * group_stride +
//   16 k + j]
// as one FMA chain per element in ascending k, from +0, or from the tile's value where
// `accumulate` (the chain goes on from the previous sub-block of the same k-block).
template <class Tile>
bool gemm_panels(const MatmulArgs& a) {
    if (a.type == Type::F32 || a.panels == nullptr) return false;
    constexpr int kRows = Tile::kRows;
    constexpr int kTileTokens = Tile::kGroups * kTokensPerGroup;
    constexpr std::int64_t kMaxTiles = (kGroupsPerBlock + Tile::kGroups - 1) / Tile::kGroups;
    const std::int64_t groups = (a.tokens + kTokensPerGroup - 1) / kTokensPerGroup;
    // Sub-blocks must hold whole blocks of the type (256 weights for the K-quants); where
    // Tile::kSubKC does not, the k-block stays whole.
    const bool sub_blocks = Tile::kSubKC % traits(a.type).block_size == 0;
    RowDecoder decoder{a.type, a.n, a.row_bytes, {}, {}, {}, {}};
    alignas(64) float weights[kRows * kWeightStride];  // 12 KiB (AVX2) or 24 KiB (AVX-512)
    using TileSums = float[kRows][kTileTokens];
    // The current k-block's chains of each tile, carried from one sub-block to the next.
    TileSums chains[kMaxTiles] = {};
    // Each panel and tile's sum over the k-blocks so far, added in k order (one vector add per
    // k-block) and written to the transposed output once, after the last k-block: adding every
    // k-block's sums to the output in place took a scalar load, add and store per element and
    // k-block (3-4 % of an F16 prefill at kKC 512, more with the sub-blocks). It takes as many
    // bytes as the call's output for one block of 128 tokens (512 per row) and stays with the
    // thread for its next call.
    const std::int64_t panel_count = (a.row_end - a.row_begin + kRows - 1) / kRows;
    thread_local std::vector<float> sums_storage;
    sums_storage.resize(static_cast<std::size_t>(panel_count * kMaxTiles * kRows * kTileTokens));
    auto* sums = reinterpret_cast<TileSums*>(sums_storage.data());
    for (std::int64_t g0 = 0; g0 < groups; g0 += kGroupsPerBlock) {
        const std::int64_t g1 = min_of(groups, g0 + kGroupsPerBlock);
        const std::int64_t tile_count = (g1 - g0 + Tile::kGroups - 1) / Tile::kGroups;
        for (std::int64_t k0 = 0; k0 < a.n; k0 += kKC) {
            const std::int64_t kc = min_of(kKC, a.n - k0);
            const std::int64_t sub = sub_blocks ? Tile::kSubKC : kc;
            const std::int64_t subs = (kc + sub - 1) / sub;
            for (std::int64_t r0 = a.row_begin; r0 < a.row_end; r0 += kRows) {
                const int rows = static_cast<int>(min_of(kRows, a.row_end - r0));
                TileSums* panel_sums = sums + (r0 - a.row_begin) / kRows * kMaxTiles;
                // The next panel's weight bytes are requested while this panel's tiles run, so
                // they arrive before its decode (waiting for them there cost ~10 % for F16),
                // a share of the rows before each tile: all of them at once filled the line
                // fill buffers, and the prefetch instructions themselves then stalled (5.6 % of
                // an AVX-512 F16 2816 x 1024 product's samples on one prefetch).
                const int next_rows = r0 + kRows < a.row_end
                                          ? static_cast<int>(min_of(kRows, a.row_end - r0 - kRows))
                                          : 0;
                const std::int64_t runs = tile_count * subs;
                const int rows_per_run = static_cast<int>((next_rows + runs - 1) / runs);
                const std::size_t bytes =
                    static_cast<std::size_t>(kc) * a.row_bytes / static_cast<std::size_t>(a.n);
                const std::uint8_t* next =
                    next_rows == 0
                        ? nullptr
                        : a.weights + static_cast<std::size_t>(r0 + kRows) * a.row_bytes +
                              static_cast<std::size_t>(k0) * a.row_bytes /
                                  static_cast<std::size_t>(a.n);
                int prefetched = 0;
                // Sub-blocks of the k-block: a tile's activations for `sub` k (16 KiB for two
                // groups at 128) and the panel's decoded sub-block then fit in L1 together, so
                // the panel stays there for all the tiles that reuse it; with the whole k-block
                // each tile's 64 KiB of activations evicted it (every tile re-read it from L2).
                for (std::int64_t s0 = 0; s0 < kc; s0 += sub) {
                    const std::int64_t sc = min_of(sub, kc - s0);
                    for (int i = 0; i < kRows; ++i) {
                        float* dst = weights + i * kWeightStride;
                        if (i < rows) {
                            decoder.decode(
                                a.weights + static_cast<std::size_t>(r0 + i) * a.row_bytes, k0 + s0,
                                sc, dst);
                        } else {
                            std::memset(dst, 0, static_cast<std::size_t>(sc) * sizeof(float));
                        }
                    }
                    for (std::int64_t t = 0; t < tile_count; ++t) {
                        for (const int end = next_rows < prefetched + rows_per_run
                                                 ? next_rows
                                                 : prefetched + rows_per_run;
                             prefetched < end; ++prefetched) {
                            const std::uint8_t* p =
                                next + static_cast<std::size_t>(prefetched) * a.row_bytes;
                            for (std::size_t o = 0; o < bytes; o += 64)
                                _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
                        }
                        const std::int64_t g = g0 + t * Tile::kGroups;
                        const int tile_groups = static_cast<int>(min_of(Tile::kGroups, g1 - g));
                        Tile::run(weights,
                                  a.panels + g * a.panel_group_stride + (k0 + s0) * kTokensPerGroup,
                                  a.panel_group_stride, tile_groups, sc, s0 > 0,
                                  k0 == 0 ? panel_sums[t] : chains[t]);
                        if (k0 > 0 && s0 + sc == kc) {
                            float* sum = &panel_sums[t][0][0];
                            const float* add = &chains[t][0][0];
                            for (int e = 0; e < kRows * kTileTokens; ++e) sum[e] += add[e];
                        }
                    }
                }
                if (k0 + kc < a.n) continue;
                for (std::int64_t t = 0; t < tile_count; ++t) {
                    const std::int64_t g = g0 + t * Tile::kGroups;
                    const int toks = static_cast<int>(
                        min_of(Tile::kGroups * kTokensPerGroup, a.tokens - g * kTokensPerGroup));
                    for (int j = 0; j < toks; ++j) {
                        float* o = a.out + (g * kTokensPerGroup + j) * a.out_stride + r0;
                        for (int i = 0; i < rows; ++i) o[i] = panel_sums[t][i][j];
                    }
                }
            }
        }
    }
    return true;
}

}  // namespace
}  // namespace tokenscope::tensor::detail
