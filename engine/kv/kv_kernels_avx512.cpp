// AVX-512 forms of the two blocked-attention kernels (KvStorage::tile_scores and
// tile_accumulate); the row conversions stay AVX2 (kv_kernels.cpp builds the table).
//
// Why: at 512 prompt tokens these two were 14 % of a 246M model's prefill, the AVX2 score
// kernel at about 45 % of the AVX2 FMA rate, and on AVX-512 machines half the FMA width idled.
//
// The kernels keep the table's contract (kv_kernels.h): a (row, key) score or an output element
// comes out the same whatever else shares the call.
// - tile_scores works on 4 rows x 4 keys (2 x 8 and 1 x 16 for leftover rows). Each pair has
//   its own 16-lane accumulator over the row (one FMA per 16 elements, in index order, the tail
//   masked with zeros), summed by one fixed tree (reduce16). A short key group repeats its last
//   key and drops those results.
// - tile_accumulate adds p * v over the keys in ascending order, one FMA per element and key,
//   the same operations as the AVX2 and scalar kernels: its outputs equal theirs bit for bit.
#include "tensor/avx512_gcc_warnings.h"  // first: it silences a GCC 12 false positive

#include <immintrin.h>

#include <cstdint>

#include "kv/kv_kernels.h"
#include "kv/tile_row_groups.h"

namespace tokenscope::kv::detail {

namespace {

inline __mmask16 lanes16(int m) {
    return static_cast<__mmask16>(m >= 16 ? 0xFFFF : (1u << m) - 1u);
}

// Lane i of the result is the sum of a[i]'s 16 lanes, by the same tree for every i: pairs of
// 4-lane groups inside each 128-bit lane, then the four 128-bit lanes.
inline __m512 reduce16(const __m512 (&a)[16]) {
    __m512 b[8];
    for (int p = 0; p < 8; ++p) {
        b[p] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * p], a[2 * p + 1]),
                             _mm512_unpackhi_ps(a[2 * p], a[2 * p + 1]));
    }
    __m512 c[4];
    for (int p = 0; p < 4; ++p) {
        const __m512d u = _mm512_castps_pd(b[2 * p]), w = _mm512_castps_pd(b[2 * p + 1]);
        c[p] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(u, w)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(u, w)));
    }
    // c[p]'s 128-bit lane L: a[4p .. 4p + 3] summed over lane L of each.
    const __m512 d0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 d1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of rows q[0, R) against keys k[0, K), R * K = 16: lane K r + j. Every pair's sum is
// the same expression whatever R and K are (the FMAs over the row, then reduce16's tree), so
// the 1 x 16 and 2 x 8 shapes that serve one or two leftover rows agree with 4 x 4 bit for bit.
template <int R, int K>
__m512 score_block(const float* const (&q)[R], const float* const (&k)[K], int n) {
    static_assert(R * K == 16);
    __m512 acc[16];
#pragma GCC unroll 16
    for (int a = 0; a < 16; ++a) acc[a] = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = lanes16(n - i);
        __m512 kv[K];
#pragma GCC unroll 16
        for (int j = 0; j < K; ++j) kv[j] = _mm512_maskz_loadu_ps(m, k[j] + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const __m512 qv = _mm512_maskz_loadu_ps(m, q[r] + i);
#pragma GCC unroll 16
            for (int j = 0; j < K; ++j) acc[K * r + j] = _mm512_fmadd_ps(qv, kv[j], acc[K * r + j]);
        }
    }
    return reduce16(acc);
}

// Rows [r0, r0 + R) of the tile's scores, all keys, in groups of K (a short last group repeats
// its last key; those lanes are dropped).
template <int R, int K>
void score_rows(const float* q, int r0, const float* const* k, int keys, int n, float* s,
                std::int64_t s_stride) {
    alignas(64) float out[16];
    const float* qr[R];
    for (int r = 0; r < R; ++r) qr[r] = q + static_cast<std::int64_t>(r0 + r) * n;
    for (int j0 = 0; j0 < keys; j0 += K) {
        const int mk = keys - j0 < K ? keys - j0 : K;
        const float* kj[K];
        for (int j = 0; j < K; ++j) kj[j] = k[j0 + (j < mk ? j : mk - 1)];
        _mm512_store_ps(out, score_block<R, K>(qr, kj, n));
        for (int r = 0; r < R; ++r) {
            float* row = s + (r0 + r) * s_stride + j0;
            for (int j = 0; j < mk; ++j) row[j] = out[K * r + j];
        }
    }
}

// Output rows [0, R) += p * v over the keys, columns [i, i + 64) (vectors past n masked off).
// Four accumulator arrays with every loop over them unrolled: otherwise GCC keeps them in
// memory and stores all of them on every key (seen in the generated code).
template <int R>
void accumulate64(const float* p, std::int64_t p_stride, const float* const* v, int keys, int n,
                  int i, float* out) {
    const __mmask16 m0 = lanes16(n - i), m1 = i + 16 < n ? lanes16(n - i - 16) : 0;
    const __mmask16 m2 = i + 32 < n ? lanes16(n - i - 32) : 0;
    const __mmask16 m3 = i + 48 < n ? lanes16(n - i - 48) : 0;
    __m512 a0[R], a1[R], a2[R], a3[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        const float* o = out + r * n + i;
        a0[r] = _mm512_maskz_loadu_ps(m0, o);
        a1[r] = _mm512_maskz_loadu_ps(m1, o + 16);
        a2[r] = _mm512_maskz_loadu_ps(m2, o + 32);
        a3[r] = _mm512_maskz_loadu_ps(m3, o + 48);
    }
    for (int j = 0; j < keys; ++j) {
        const float* vj = v[j] + i;
        const __m512 x0 = _mm512_maskz_loadu_ps(m0, vj);
        const __m512 x1 = _mm512_maskz_loadu_ps(m1, vj + 16);
        const __m512 x2 = _mm512_maskz_loadu_ps(m2, vj + 32);
        const __m512 x3 = _mm512_maskz_loadu_ps(m3, vj + 48);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const __m512 w = _mm512_set1_ps(p[r * p_stride + j]);
            a0[r] = _mm512_fmadd_ps(w, x0, a0[r]);
            a1[r] = _mm512_fmadd_ps(w, x1, a1[r]);
            a2[r] = _mm512_fmadd_ps(w, x2, a2[r]);
            a3[r] = _mm512_fmadd_ps(w, x3, a3[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        float* o = out + r * n + i;
        _mm512_mask_storeu_ps(o, m0, a0[r]);
        _mm512_mask_storeu_ps(o + 16, m1, a1[r]);
        _mm512_mask_storeu_ps(o + 32, m2, a2[r]);
        _mm512_mask_storeu_ps(o + 48, m3, a3[r]);
    }
}

template <int R>
void accumulate_rows(const float* p, std::int64_t p_stride, const float* const* v, int keys, int n,
                     float* out) {
    for (int i = 0; i < n; i += 64) accumulate64<R>(p, p_stride, v, keys, n, i, out);
}

}  // namespace

void tile_scores_avx512(const float* q, int rows, const float* const* k, int keys, int n, float* s,
                        std::int64_t s_stride) {
    int r = 0;
    for (; r + 4 <= rows; r += 4) score_rows<4, 4>(q, r, k, keys, n, s, s_stride);
    for (; r + 2 <= rows; r += 2) score_rows<2, 8>(q, r, k, keys, n, s, s_stride);
    if (r < rows) score_rows<1, 16>(q, r, k, keys, n, s, s_stride);
}

void tile_accumulate_avx512(const float* p, std::int64_t p_stride, int rows, const float* const* v,
                            int keys, int n, float* out) {
    for_row_groups(rows, [&](int r, auto count) {
        accumulate_rows<decltype(count)::value>(p + r * p_stride, p_stride, v, keys, n,
                                                out + static_cast<std::int64_t>(r) * n);
    });
}

}  // namespace tokenscope::kv::detail
