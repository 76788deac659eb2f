// AVX2+FMA kernels of ops:: (see cpu_ops_kernels.h). Every function using those instructions
// carries TOKENSCOPE_TARGET, so the file itself stays baseline x86-64 and needs no compiler
// flags; they run only after avx2_op_kernels() saw both features. They call no library
// function and do all arithmetic through intrinsics, which also keeps the compiler from
// contracting a product and a sum into an FMA where the portable code rounds twice.
#include "runtime/cpu_ops_kernels.h"
#include "util/cpu_features.h"

#if defined(TOKENSCOPE_X86_64)
#include <immintrin.h>

#include "runtime/exp_avx2.h"
#endif

namespace tokenscope::runtime::ops::detail {

#if defined(TOKENSCOPE_X86_64)
namespace {

#if defined(TOKENSCOPE_X86_64)
using simd::exp_nonpositive;
#endif

// 1 / (1 + exp(-z)) without overflow and with full relative precision for z < 0 too: with
// e = exp(-|z|), 1 / (1 + e) for z >= 0 and e / (1 + e) for z < 0.
TOKENSCOPE_TARGET("avx2,fma") __m256 sigmoid(__m256 z) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 e = exp_nonpositive(_mm256_or_ps(z, sign));  // exp(-|z|)
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_div_ps(_mm256_blendv_ps(one, e, negative), _mm256_add_ps(one, e));
}

// -infinity, the padding of softmax rows (from its bits: no library call in this file).
TOKENSCOPE_TARGET("avx2,fma") float negative_infinity() {
    return _mm_cvtss_f32(_mm_castsi128_ps(_mm_set1_epi32(static_cast<int>(0xff800000u))));
}

// The last 1-7 elements of a row as a vector, the other lanes `fill`; and back. Tails go
// through the same vector code as the rest, so an element's result does not depend on where
// in its row it sits.
TOKENSCOPE_TARGET("avx2,fma") __m256 load_tail(const float* p, std::int64_t count, float fill) {
    alignas(32) float lanes[8];
    for (std::int64_t j = 0; j < 8; ++j) lanes[j] = j < count ? p[j] : fill;
    return _mm256_load_ps(lanes);
}

TOKENSCOPE_TARGET("avx2,fma") void store_tail(float* p, __m256 v, std::int64_t count) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    for (std::int64_t j = 0; j < count; ++j) p[j] = lanes[j];
}

TOKENSCOPE_TARGET("avx2,fma")
void exp_nonpositive_avx2(const float* x, float* out, std::int64_t n) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp_nonpositive(_mm256_loadu_ps(x + i)));
    if (i < n) store_tail(out + i, exp_nonpositive(load_tail(x + i, n - i, 0.0f)), n - i);
}

// The sum of squares in double as the portable code (the squares of floats are exact in
// double; only the order of the additions differs), then the same float scaling: x * inv,
// then * weight, each rounded.
TOKENSCOPE_TARGET("avx2,fma")
void rms_norm_avx2(const float* x, const float* weight, float* out, std::int64_t n, float eps) {
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        acc0 = _mm256_fmadd_pd(lo, lo, acc0);
        acc1 = _mm256_fmadd_pd(hi, hi, acc1);
    }
    if (i < n) {
        const __m256 v = load_tail(x + i, n - i, 0.0f);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        acc0 = _mm256_fmadd_pd(lo, lo, acc0);
        acc1 = _mm256_fmadd_pd(hi, hi, acc1);
    }
    const __m256d acc = _mm256_add_pd(acc0, acc1);
    __m128d sum = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
    sum = _mm_add_sd(sum, _mm_unpackhi_pd(sum, sum));
    // 1 / sqrt(sum / n + eps) in double, rounded to float, as the portable code.
    __m128d mean = _mm_div_sd(sum, _mm_set_sd(static_cast<double>(n)));
    mean = _mm_add_sd(mean, _mm_set_sd(static_cast<double>(eps)));
    const __m128d inv_d = _mm_div_sd(_mm_set_sd(1.0), _mm_sqrt_sd(mean, mean));
    const __m256 inv = _mm256_set1_ps(_mm_cvtss_f32(_mm_cvtsd_ss(_mm_setzero_ps(), inv_d)));
    i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), inv);
        if (weight) v = _mm256_mul_ps(v, _mm256_loadu_ps(weight + i));
        _mm256_storeu_ps(out + i, v);
    }
    if (i < n) {
        __m256 v = _mm256_mul_ps(load_tail(x + i, n - i, 0.0f), inv);
        if (weight) v = _mm256_mul_ps(v, load_tail(weight + i, n - i, 0.0f));
        store_tail(out + i, v, n - i);
    }
}

// gate * sigmoid(gate) * up: silu(g) = g / (1 + exp(-g)).
TOKENSCOPE_TARGET("avx2,fma") __m256 silu_mul8(__m256 g, __m256 u) {
    return _mm256_mul_ps(_mm256_mul_ps(g, sigmoid(g)), u);
}

TOKENSCOPE_TARGET("avx2,fma") void silu_mul_avx2(float* gate, const float* up, std::int64_t n) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(gate + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    }
    if (i < n) {
        store_tail(gate + i,
                   silu_mul8(load_tail(gate + i, n - i, 0.0f), load_tail(up + i, n - i, 0.0f)),
                   n - i);
    }
}

// The tanh approximation of GELU as a sigmoid: 0.5 (1 + tanh(z)) = sigmoid(2z), so
// gelu(g) = g * sigmoid(2 sqrt(2/pi) (g + 0.044715 g^3)), one exp and no cancellation for g < 0.
TOKENSCOPE_TARGET("avx2,fma") __m256 gelu_tanh_mul8(__m256 g, __m256 u) {
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 inner = _mm256_add_ps(g, _mm256_mul_ps(_mm256_set1_ps(0.044715f), g3));
    const __m256 z = _mm256_mul_ps(_mm256_set1_ps(2.0f * 0.7978845608028654f), inner);
    return _mm256_mul_ps(_mm256_mul_ps(g, sigmoid(z)), u);
}

TOKENSCOPE_TARGET("avx2,fma")
void gelu_tanh_mul_avx2(float* gate, const float* up, std::int64_t n) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(gate + i,
                         gelu_tanh_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    }
    if (i < n) {
        store_tail(gate + i,
                   gelu_tanh_mul8(load_tail(gate + i, n - i, 0.0f), load_tail(up + i, n - i, 0.0f)),
                   n - i);
    }
}

TOKENSCOPE_TARGET("avx2,fma") float horizontal_max(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

// exp(x[i] - max) for the 8 elements from x (count of them real, count <= 0: none), stored
// back; the lanes past the row give exactly 0.
TOKENSCOPE_TARGET("avx2,fma") __m256 exp_shifted(float* x, std::int64_t count, __m256 shift) {
    if (count >= 8) {
        const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x), shift));
        _mm256_storeu_ps(x, e);
        return e;
    }
    if (count <= 0) return _mm256_setzero_ps();
    const float kNegInf = negative_infinity();
    const __m256 e = exp_nonpositive(_mm256_sub_ps(load_tail(x, count, kNegInf), shift));
    store_tail(x, e, count);
    return e;
}

// As the portable softmax: exp(x - max) in float, summed in double, times the float 1 / sum,
// and bit for bit the AVX-512 kernel's result (cpu_ops_avx512.cpp, test_cpu_ops): the row goes in
// blocks of 64 elements as four steps of 16 lanes (lo: lanes 0-7, hi: 8-15); each lane adds its
// four terms in float, the block's 16 sums widen to double accumulators (a0..a3: lanes 0-3,
// 4-7, 8-11, 12-15), and those reduce in the AVX-512 kernel's order. The float pre-sum is what
// makes this cheaper than widening every vector (two conversions and two double adds per 8
// terms): softmax was a fifth of attention's samples in an AVX2 prefill of 512 tokens.
// The padding lanes are -infinity: no effect on the maximum, exp gives 0.
TOKENSCOPE_TARGET("avx2,fma") float softmax_avx2(float* x, std::int64_t n) {
    const float kNegInf = negative_infinity();
    __m256 best = _mm256_set1_ps(kNegInf);
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) best = _mm256_max_ps(best, _mm256_loadu_ps(x + i));
    if (i < n) best = _mm256_max_ps(best, load_tail(x + i, n - i, kNegInf));
    const float max = horizontal_max(best);
    const __m256 shift = _mm256_set1_ps(max);

    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    for (std::int64_t i0 = 0; i0 < n; i0 += 64) {
        __m256 lo = _mm256_setzero_ps(), hi = lo;
        const std::int64_t i1 = i0 + 64 < n ? i0 + 64 : n;
        for (i = i0; i < i1; i += 16) {
            lo = _mm256_add_ps(lo, exp_shifted(x + i, n - i, shift));
            hi = _mm256_add_ps(hi, exp_shifted(x + i + 8, n - i - 8, shift));
        }
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(lo)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
    }
    // Lanes 0-7 plus lanes 8-15, then halves of what is left.
    const __m256d h = _mm256_add_pd(_mm256_add_pd(a0, a2), _mm256_add_pd(a1, a3));
    __m128d sum = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    sum = _mm_add_sd(sum, _mm_unpackhi_pd(sum, sum));
    const __m128d inv_d = _mm_div_sd(_mm_set_sd(1.0), sum);
    const __m256 inv = _mm256_set1_ps(_mm_cvtss_f32(_mm_cvtsd_ss(_mm_setzero_ps(), inv_d)));
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    if (i < n) store_tail(x + i, _mm256_mul_ps(load_tail(x + i, n - i, 0.0f), inv), n - i);
    return max;
}

constexpr OpKernels kAvx2{"avx2",        exp_nonpositive_avx2, rms_norm_avx2,
                          silu_mul_avx2, gelu_tanh_mul_avx2,   softmax_avx2};

}  // namespace
#endif

const OpKernels* avx2_op_kernels() {
#if defined(TOKENSCOPE_X86_64)
    const cpu::X86Features& f = cpu::x86_features();
    if (f.avx2 && f.fma) return &kAvx2;
#endif
    return nullptr;
}

}  // namespace tokenscope::runtime::ops::detail
