// AVX-512 forms of the two blocked-attention kernels (KvStorage::tile_scores and
// tile_accumulate) and of the F16 conversions the tiles use; the other row kernels stay AVX2
// (kv_kernels.cpp builds the table). Compiled with AVX-512 F/BW/VL, used at the AVX-512 matmul
// level only, which requires them.
//
// Why: at 512 prompt tokens these two were 14 % of a 246M model's prefill, the AVX2 score
// kernel at about 45 % of the AVX2 FMA rate, and on AVX-512 machines half the FMA width idled.
//
// The kernels keep the table's contract (kv_kernels.h): a (row, key) score or an output element
// comes out the same whatever else shares the call.
// - tile_scores keeps keys in the lanes of a transposed K tile (KvStorage stores K transposed
//   inside a block), 12 rows x 32 keys per pass: per element one key-vector load serves 12 rows'
//   FMAs, and each score is the contract's chain of FMAs, equal to the AVX2 and scalar tables'.
//   The form it replaced kept the row's elements in the lanes and needed a 16-way horizontal sum
//   per 16 scores: 59 GFLOP/s on one thread at SmolLM2's shape, about a third of the FMA peak.
// - tile_accumulate adds p * v over the keys in ascending order, one FMA per element and key,
//   the same operations as the AVX2 and scalar kernels: its outputs equal theirs bit for bit.
#include "tensor/avx512_gcc_warnings.h"  // first: it silences a GCC 12 false positive

#include <immintrin.h>

#include <cstdint>

#include "kv/kv_kernels.h"
#include "kv/score_keys.h"
#include "kv/tile_row_groups.h"

namespace tokenscope::kv::detail {

namespace {

inline __mmask16 lanes16(int m) {
    return static_cast<__mmask16>(m >= 16 ? 0xFFFF : (1u << m) - 1u);
}

// 16-lane vectors for score_keys.h: 12 rows x 32 keys per pass (24 accumulators and two key
// vectors of the 32 registers).
struct Lanes16 {
    using Vec = __m512;
    using Key = float;
    static constexpr bool kScaledKeys = false;
    static constexpr int kLanes = 16;
    static constexpr int kRows = 12;
    static Vec zero() { return _mm512_setzero_ps(); }
    static Vec set1(float x) { return _mm512_set1_ps(x); }
    static Vec load(const float* p) { return _mm512_loadu_ps(p); }
    static Vec broadcast(const float* p) { return _mm512_set1_ps(*p); }
    static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
    static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
    static void store(float* p, Vec x, int cols) { _mm512_mask_storeu_ps(p, lanes16(cols), x); }
};

// Output rows [0, R) += p * v over the keys, columns [i, i + 64) (vectors past n masked off).
// Four accumulator arrays with every loop over them unrolled: otherwise GCC keeps them in
// memory and stores all of them on every key (seen in the generated code).
template <int R, bool kFull>
void accumulate64(const float* p, std::int64_t p_stride, const float* const* v, int keys, int n,
                  int i, float* out) {
    // kFull: all 64 columns; plain loads and stores, so that the next tile's loads of the
    // accumulators are forwarded from this one's stores (masked stores do not forward on every
    // CPU).
    const __mmask16 m0 = kFull ? 0xFFFF : lanes16(n - i);
    const __mmask16 m1 = kFull ? 0xFFFF : i + 16 < n ? lanes16(n - i - 16) : 0;
    const __mmask16 m2 = kFull ? 0xFFFF : i + 32 < n ? lanes16(n - i - 32) : 0;
    const __mmask16 m3 = kFull ? 0xFFFF : i + 48 < n ? lanes16(n - i - 48) : 0;
    auto load = [&](__mmask16 m, const float* x) __attribute__((always_inline)) {
        return kFull ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(m, x);
    };
    __m512 a0[R], a1[R], a2[R], a3[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const float* o = out + r * n + i;
        a0[r] = load(m0, o);
        a1[r] = load(m1, o + 16);
        a2[r] = load(m2, o + 32);
        a3[r] = load(m3, o + 48);
    }
    for (int j = 0; j < keys; ++j) {
        const float* vj = v[j] + i;
        const __m512 x0 = load(m0, vj);
        const __m512 x1 = load(m1, vj + 16);
        const __m512 x2 = load(m2, vj + 32);
        const __m512 x3 = load(m3, vj + 48);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m512 w = _mm512_set1_ps(p[r * p_stride + j]);
            a0[r] = _mm512_fmadd_ps(w, x0, a0[r]);
            a1[r] = _mm512_fmadd_ps(w, x1, a1[r]);
            a2[r] = _mm512_fmadd_ps(w, x2, a2[r]);
            a3[r] = _mm512_fmadd_ps(w, x3, a3[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        float* o = out + r * n + i;
        if constexpr (kFull) {
            _mm512_storeu_ps(o, a0[r]);
            _mm512_storeu_ps(o + 16, a1[r]);
            _mm512_storeu_ps(o + 32, a2[r]);
            _mm512_storeu_ps(o + 48, a3[r]);
        } else {
            _mm512_mask_storeu_ps(o, m0, a0[r]);
            _mm512_mask_storeu_ps(o + 16, m1, a1[r]);
            _mm512_mask_storeu_ps(o + 32, m2, a2[r]);
            _mm512_mask_storeu_ps(o + 48, m3, a3[r]);
        }
    }
}

template <int R>
void accumulate_rows(const float* p, std::int64_t p_stride, const float* const* v, int keys, int n,
                     float* out) {
    int i = 0;
    for (; i + 64 <= n; i += 64) accumulate64<R, true>(p, p_stride, v, keys, n, i, out);
    if (i < n) accumulate64<R, false>(p, p_stride, v, keys, n, i, out);
}

}  // namespace

void f16_to_f32_avx512(const std::uint16_t* in, float* out, int n) {
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = lanes16(n - i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, in + i)));
    }
}

// Element row i of a run: len (at most a block, here up to 32) halves at src + i * stride.
void k_run_f16_avx512(const std::uint16_t* src, int stride, int len, int n, float* dst,
                      int dst_stride) {
    for (int i = 0; i < n; ++i) {
        const std::uint16_t* x = src + static_cast<std::int64_t>(i) * stride;
        float* y = dst + static_cast<std::int64_t>(i) * dst_stride;
        for (int j = 0; j < len; j += 16) {
            const __mmask16 m = lanes16(len - j);
            _mm512_mask_storeu_ps(y + j, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + j)));
        }
    }
}

void tile_scores_avx512(const float* q, int rows, const float* kt, int kt_stride, int keys, int n,
                        float scale, float* s, std::int64_t s_stride) {
    scores_in_lanes<Lanes16>(q, rows, kt, kt_stride, keys, n, scale, s, s_stride);
}

// Rows per accumulate pass: 24 accumulators, four value vectors and a broadcast of the 32
// registers.
constexpr int kAccumulateRows = 6;

void tile_accumulate_avx512(const float* p, std::int64_t p_stride, int rows, const float* const* v,
                            int keys, int n, float* out) {
    for_row_groups<kAccumulateRows>(rows, [&](int r, auto count) {
        accumulate_rows<decltype(count)::value>(p + r * p_stride, p_stride, v, keys, n,
                                                out + static_cast<std::int64_t>(r) * n);
    });
}

}  // namespace tokenscope::kv::detail
