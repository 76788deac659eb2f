#include "runtime/logit_kernels.h"

#include <cmath>
#include <limits>

#include "tensor/matmul.h"
#include "util/cpu_features.h"

#if defined(TOKENSCOPE_X86_64)
#include <immintrin.h>

#include "runtime/exp_avx2.h"
#endif

namespace tokenscope::runtime::sampling {

namespace {

#if defined(TOKENSCOPE_X86_64)
using simd::exp_nonpositive;
#endif

constexpr float kInf = std::numeric_limits<float>::infinity();

LogitScan scan_portable(const float* logits, std::size_t n, float* block_max) {
    LogitScan out{-kInf, true, 0.0};
    for (std::size_t start = 0, b = 0; start < n; start += kLogitBlock, ++b) {
        const std::size_t end = start + kLogitBlock < n ? start + kLogitBlock : n;
        float best = -kInf;
        for (std::size_t i = start; i < end; ++i) {
            const float x = logits[i];
            out.clean = out.clean && x < kInf;  // false for NaN too
            if (x > best) best = x;
        }
        block_max[b] = best;
        if (best > out.max) out.max = best;
    }
    return out;
}

// Two passes, one accumulator in index order, float exp: exactly what the sampler computed
// before these kernels existed, so this table is also the regression reference.
LogitScan scan_softmax_portable(const float* logits, std::size_t n, float* block_max) {
    LogitScan out = scan_portable(logits, n, block_max);
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += std::exp(logits[i] - out.max);
    out.sum_exp = sum;
    return out;
}

constexpr LogitKernels kPortable{"portable", scan_portable, scan_softmax_portable};

#if defined(TOKENSCOPE_X86_64)
// Online softmax: a sum taken relative to one maximum, moved to a new, larger one. Baseline
// code, called from the AVX2 kernel, which calls no library function itself.
double rescale(double sum, float from, float to) {
    return sum * std::exp(static_cast<double>(from) - static_cast<double>(to));
}

// The functions below use AVX2 and FMA and run only after best_logit_kernels() saw both. They
// call no library function (a library inline instantiated here could become the program's
// only copy; see util/cpu_features.h). On MSVC TOKENSCOPE_TARGET is empty and this file must
// not get /arch:AVX2.

TOKENSCOPE_TARGET("avx2,fma") float horizontal_max(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

// The last 1-7 logits of a block, padded with -infinity (no effect on a maximum; adds 0 to a
// sum of exps).
TOKENSCOPE_TARGET("avx2,fma") __m256 load_padded(const float* logits, std::size_t count) {
    float lanes[8];
    for (std::size_t j = 0; j < 8; ++j) lanes[j] = j < count ? logits[j] : -kInf;
    return _mm256_loadu_ps(lanes);
}

// One block's maximum; ORs into `bad` the lanes that saw a NaN or +infinity (!(x < inf)).
TOKENSCOPE_TARGET("avx2,fma")
float block_maximum(const float* logits, std::size_t count, __m256& bad) {
    const __m256 inf = _mm256_set1_ps(kInf);
    __m256 best = _mm256_set1_ps(-kInf);
    for (std::size_t i = 0; i < count; i += 8) {
        const __m256 x =
            i + 8 <= count ? _mm256_loadu_ps(logits + i) : load_padded(logits + i, count - i);
        best = _mm256_max_ps(best, x);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(x, inf, _CMP_NLT_UQ));
    }
    return horizontal_max(best);
}

TOKENSCOPE_TARGET("avx2,fma")
LogitScan scan_avx2(const float* logits, std::size_t n, float* block_max) {
    __m256 bad = _mm256_setzero_ps();
    LogitScan out{-kInf, true, 0.0};
    for (std::size_t start = 0, b = 0; start < n; start += kLogitBlock, ++b) {
        const std::size_t count = n - start < kLogitBlock ? n - start : kLogitBlock;
        block_max[b] = block_maximum(logits + start, count, bad);
        if (block_max[b] > out.max) out.max = block_max[b];
    }
    out.clean = _mm256_movemask_ps(bad) == 0;
    return out;
}

// Maximum and normaliser in one pass (the row is read from memory once; the second look at a
// block hits L1). Each block's exps, relative to the maximum so far, are summed in float (eight
// lanes x two accumulators of 16 terms each: few enough that float rounding stays at a few
// ulps, and no double conversions in the loop), then added to a double total, which is rescaled
// whenever a block raises the maximum.
TOKENSCOPE_TARGET("avx2,fma")
LogitScan scan_softmax_avx2(const float* logits, std::size_t n, float* block_max) {
    __m256 bad = _mm256_setzero_ps();
    LogitScan out{-kInf, true, 0.0};
    double sum = 0.0;
    for (std::size_t start = 0, b = 0; start < n; start += kLogitBlock, ++b) {
        const float* block = logits + start;
        const std::size_t count = n - start < kLogitBlock ? n - start : kLogitBlock;
        const float block_best = block_maximum(block, count, bad);
        block_max[b] = block_best;
        if (block_best > out.max) {
            if (out.max > -kInf) sum = rescale(sum, out.max, block_best);
            out.max = block_best;
        }
        if (!(block_best > -kInf)) continue;  // all masked (or NaN): adds nothing
        const __m256 shift = _mm256_set1_ps(out.max);
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        std::size_t i = 0;
        for (; i + 16 <= count; i += 16) {
            const __m256 x0 = _mm256_sub_ps(_mm256_loadu_ps(block + i), shift);
            const __m256 x1 = _mm256_sub_ps(_mm256_loadu_ps(block + i + 8), shift);
            acc0 = _mm256_add_ps(acc0, exp_nonpositive(x0));
            acc1 = _mm256_add_ps(acc1, exp_nonpositive(x1));
        }
        for (; i < count; i += 8) {
            const __m256 x =
                i + 8 <= count ? _mm256_loadu_ps(block + i) : load_padded(block + i, count - i);
            acc0 = _mm256_add_ps(acc0, exp_nonpositive(_mm256_sub_ps(x, shift)));
        }
        const __m256 lanes = _mm256_add_ps(acc0, acc1);
        const __m256d wide = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(lanes)),
                                           _mm256_cvtps_pd(_mm256_extractf128_ps(lanes, 1)));
        const __m128d pair =
            _mm_add_pd(_mm256_castpd256_pd128(wide), _mm256_extractf128_pd(wide, 1));
        sum += _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)));
    }
    out.clean = _mm256_movemask_ps(bad) == 0;
    out.sum_exp = sum;
    return out;
}

constexpr LogitKernels kAvx2{"avx2", scan_avx2, scan_softmax_avx2};
#endif

}  // namespace

const LogitKernels& portable_logit_kernels() {
    return kPortable;
}

const LogitKernels& best_logit_kernels() {
#if defined(TOKENSCOPE_X86_64)
    // The matmul kernels' level, so that TOKENSCOPE_SIMD=scalar (or a test's set_simd_level)
    // turns these off too.
    const cpu::X86Features& f = cpu::x86_features();
    if (f.avx2 && f.fma && tensor::active_simd_level() != tensor::SimdLevel::Scalar) return kAvx2;
#endif
    return kPortable;
}

}  // namespace tokenscope::runtime::sampling
