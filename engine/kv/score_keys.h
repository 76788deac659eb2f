#pragma once
// The blocked-attention score kernel with keys in the vector lanes (kv_kernels.h's tile_scores
// contract), written once for both instruction sets. L describes the vectors: Vec, kLanes (floats
// per vector), kRows (rows per pass, as many as the registers hold: 12 for AVX-512's 32
// registers, 6 for AVX2's 16), and zero, load, broadcast, fmadd, mul, set1 and store(p, x, cols)
// (the first cols lanes, cols >= 1), Key, the stored element load reads (float for a converted
// tile; std::uint16_t where load converts F16 straight from the cache, which gives the same
// floats: the conversion is exact), and kScaledKeys: true where each key's elements are codes
// times a per-key scale (Q8), which score_keys multiplies in as the tile's conversion does
// (load_scales reads kLanes keys' scales). Each file defines its L over its own intrinsics and
// includes this header; unnamed namespace and no standard header but <cstdint>, as
// kv_kernels.h and tile_row_groups.h explain.
#include <cstdint>

#include "kv/tile_row_groups.h"

namespace tokenscope::kv::detail {
namespace {

// Rows [0, R) against the V * kLanes keys from kt's column 0 (`keys` of them stored, 1 to
// V * kLanes): per (row, key) acc = fma(q_i, k_i, acc) over the row in order, from +0, then one
// multiplication by the scale. The key vectors are loaded once per element and serve R rows.
// With L::kScaledKeys, k_i of key j is the product code * key_scales[j], rounded, as in a tile.
template <class L, int R, int V>
void score_keys(const float* q, int n, const typename L::Key* kt, int kt_stride, int keys,
                typename L::Vec scale, float* s, std::int64_t s_stride, const float* key_scales) {
    [[maybe_unused]] typename L::Vec key_scale[V];
    if constexpr (L::kScaledKeys) {
        for (int v = 0; v < V; ++v) key_scale[v] = L::load_scales(key_scales + L::kLanes * v);
    }
    typename L::Vec acc[R][V];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) acc[r][v] = L::zero();
    }
    for (int i = 0; i < n; ++i) {
        typename L::Vec k[V];
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) {
            k[v] = L::load(kt + i * kt_stride + L::kLanes * v);
            if constexpr (L::kScaledKeys) k[v] = L::mul(k[v], key_scale[v]);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const typename L::Vec b = L::broadcast(q + r * n + i);
#pragma GCC unroll 2
            for (int v = 0; v < V; ++v) acc[r][v] = L::fmadd(b, k[v], acc[r][v]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) {
            const int cols = keys - L::kLanes * v;
            if (cols > 0) {
                L::store(s + r * s_stride + L::kLanes * v, L::mul(acc[r][v], scale),
                         cols < L::kLanes ? cols : L::kLanes);
            }
        }
    }
}

template <class L, int V>
void score_rows(const float* q, int rows, const typename L::Key* kt, int kt_stride, int keys, int n,
                typename L::Vec scale, float* s, std::int64_t s_stride, const float* key_scales) {
    for_row_groups<L::kRows>(rows, [&](int r, auto count) {
        score_keys<L, decltype(count)::value, V>(q + r * n, n, kt, kt_stride, keys, scale,
                                                 s + r * s_stride, s_stride, key_scales);
    });
}

// The whole tile: keys in passes of two vectors (one for a short last pass). key_scales: the
// keys' scales where L::kScaledKeys (else unused).
template <class L>
void scores_in_lanes(const float* q, int rows, const typename L::Key* kt, int kt_stride, int keys,
                     int n, float scale, float* s, std::int64_t s_stride,
                     const float* key_scales = nullptr) {
    const typename L::Vec sv = L::set1(scale);
    for (int j = 0; j < keys; j += 2 * L::kLanes) {
        const float* js = L::kScaledKeys ? key_scales + j : nullptr;
        if (keys - j > L::kLanes) {
            score_rows<L, 2>(q, rows, kt + j, kt_stride, keys - j, n, sv, s + j, s_stride, js);
        } else {
            score_rows<L, 1>(q, rows, kt + j, kt_stride, keys - j, n, sv, s + j, s_stride, js);
        }
    }
}

}  // namespace
}  // namespace tokenscope::kv::detail
