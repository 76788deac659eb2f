#pragma once
// exp for non-positive arguments in AVX2+FMA, shared by the softmax/activation kernels
// (cpu_ops_avx2.cpp) and the sampler's logit scan (logit_kernels.cpp). Included only inside
// `#if defined(TOKENSCOPE_X86_64)` after <immintrin.h>; the function carries its own target
// attribute and lives in an unnamed namespace, so each including file gets its own copy and no
// baseline caller can pick it up. No standard headers: see engine/kv/kv_kernels.h.
#include "runtime/exp_constants.h"
#include "util/cpu_features.h"

namespace tokenscope::runtime::simd {
namespace {

// exp(x) for x <= 0: Cephes' expf (x = n ln2 + r, |r| <= ln2 / 2; 1 + r + r^2 P(r) with P of
// degree 5; 2^n through the exponent bits). Measured over every float in [-87.33654, 0]
// against exp in double: at most 8.4e-8 relative error (1.41 u, u = 2^-24; glibc's expf,
// correctly rounded, 5.96e-8); test_cpu_ops checks 10^7 of them. Arguments below
// ln(FLT_MIN) ~ -87.34, -infinity included, give exactly 0 instead of a denormal.
TOKENSCOPE_TARGET("avx2,fma") __m256 exp_nonpositive(__m256 x) {
    namespace c = exp_constants;
    const __m256 lowest = _mm256_set1_ps(c::kLowest);
    const __m256 underflow = _mm256_cmp_ps(x, lowest, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lowest);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(c::kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::kLn2Hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::kLn2Lo), r);
    __m256 p = _mm256_set1_ps(c::kP[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c::kP[i]));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    // n >= -126 after the clamp, so 2^n is a normal float.
    const __m256i exponent =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(exponent)));
}

}  // namespace
}  // namespace tokenscope::runtime::simd
