// AVX-512 softmax for ops:: (see cpu_ops_kernels.h): the AVX-512 table is the AVX2 one with
// this kernel (and its exp, exposed like the AVX2 table's for the tests). Why: at 512 prompt tokens
// the AVX2 softmax was a quarter of attention's time once the score kernel kept keys in the lanes
// (SmolLM2's shape, one thread). The other ops are a few percent of a forward pass and stay AVX2.
//
// The same arithmetic as softmax_avx2, sixteen lanes wide, and the same bits: the exp is
// exp_avx2.h's polynomial step for step (so each exp(x - max) equals the AVX2 one), each lane
// adds four vectors in float (at most 3 roundings, relative, of terms in [0, 1]) before
// widening to the double accumulators, the reduction is written out in the AVX2 kernel's order,
// and the result is x times the float inverse of the sum. The float pre-sum came first here: the
// per-vector widening had been 46 % of the softmax's samples in a 2048-token SmolLM2 prefill;
// `pbench` AVX-512, 2 threads, alternated three times: 2048 tokens 1237-1278 -> 1288-1326
// tok/s, 512 tokens 2022-2053 -> 2033-2056 (an earlier trial at 512 tokens had also measured no
// difference there). Baseline file like cpu_ops_avx2.cpp: the functions carry
// TOKENSCOPE_TARGET.
#include "tensor/avx512_gcc_warnings.h"  // first: it silences a GCC 12 false positive

#include "runtime/cpu_ops_kernels.h"
#include "runtime/exp_constants.h"
#include "util/cpu_features.h"

#if defined(TOKENSCOPE_X86_64)
#include <immintrin.h>
#endif

namespace tokenscope::runtime::ops::detail {

#if defined(TOKENSCOPE_X86_64)
namespace {

// exp_avx2.h's exp_nonpositive on sixteen lanes: the same constants (exp_constants.h) and
// operations in the same order, so every lane gives the AVX2 function's bits (test_cpu_ops).
TOKENSCOPE_TARGET("avx512f") __m512 exp_nonpositive16(__m512 x) {
    namespace c = simd::exp_constants;
    const __m512 lowest = _mm512_set1_ps(c::kLowest);
    const __mmask16 keep = _mm512_cmp_ps_mask(x, lowest, _CMP_NLT_UQ);  // not underflowing
    x = _mm512_max_ps(x, lowest);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(c::kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::kLn2Hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::kLn2Lo), r);
    __m512 p = _mm512_set1_ps(c::kP[0]);
    for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c::kP[i]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    const __m512i exponent =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(keep, p, _mm512_castsi512_ps(exponent));
}

TOKENSCOPE_TARGET("avx512f") __mmask16 first_lanes(std::int64_t count) {
    return static_cast<__mmask16>(count >= 16 ? 0xFFFF : (1u << count) - 1u);
}

TOKENSCOPE_TARGET("avx512f")
void exp_nonpositive_avx512(const float* x, float* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = first_lanes(n - i);
        _mm512_mask_storeu_ps(out + i, m, exp_nonpositive16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

// The padding lanes of the last vector read as -infinity: no effect on the maximum, and exp
// gives exactly 0, so they add nothing to the sum.
TOKENSCOPE_TARGET("avx512f") float softmax_avx512(float* x, std::int64_t n) {
    const __m512 neg_inf = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0xff800000u)));
    __m512 best = neg_inf;
    for (std::int64_t i = 0; i < n; i += 16)
        best = _mm512_max_ps(best, _mm512_mask_loadu_ps(neg_inf, first_lanes(n - i), x + i));
    const float max = _mm512_reduce_max_ps(best);
    const __m512 shift = _mm512_set1_ps(max);

    __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
    for (std::int64_t i0 = 0; i0 < n; i0 += 64) {
        __m512 part = _mm512_setzero_ps();
        const std::int64_t i1 = i0 + 64 < n ? i0 + 64 : n;
        for (std::int64_t i = i0; i < i1; i += 16) {
            const __mmask16 m = first_lanes(n - i);
            const __m512 e =
                exp_nonpositive16(_mm512_sub_ps(_mm512_mask_loadu_ps(neg_inf, m, x + i), shift));
            _mm512_mask_storeu_ps(x + i, m, e);
            part = _mm512_add_ps(part, e);
        }
        acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(part)));
        acc1 = _mm512_add_pd(
            acc1,
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(part), 1))));
    }
    // Written out rather than _mm512_reduce_add_pd, whose order is the compiler's: the AVX2
    // kernel reduces its four accumulators in this order.
    const __m512d all = _mm512_add_pd(acc0, acc1);
    const __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(all), _mm512_extractf64x4_pd(all, 1));
    __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    pair = _mm_add_sd(pair, _mm_unpackhi_pd(pair, pair));
    const double sum = _mm_cvtsd_f64(pair);
    const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
    for (std::int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = first_lanes(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    }
    return max;
}

}  // namespace
#endif

const OpKernels* avx512_op_kernels() {
#if defined(TOKENSCOPE_X86_64)
    static const OpKernels* const table = []() -> const OpKernels* {
        const OpKernels* avx2 = avx2_op_kernels();
        if (avx2 == nullptr || !cpu::x86_features().avx512f) return nullptr;
        static OpKernels t = *avx2;
        t.name = "avx512";
        t.exp_nonpositive = exp_nonpositive_avx512;
        t.softmax = softmax_avx512;
        return &t;
    }();
    return table;
#else
    return nullptr;
#endif
}

}  // namespace tokenscope::runtime::ops::detail
