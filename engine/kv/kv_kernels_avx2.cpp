// AVX2 + FMA + F16C row kernels for KvStorage. This file alone is compiled with
// -mavx2 -mfma -mf16c (engine/kv/CMakeLists.txt); kv_storage.cpp uses it only after
// cpu::x86_features() said yes. No standard library includes here (see kv_kernels.h).
#include <immintrin.h>

#include "kv/kv_kernels.h"

namespace tokenscope::kv::detail {

namespace {

float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 shuf = _mm_movehdup_ps(s);
    s = _mm_add_ps(s, shuf);
    shuf = _mm_movehl_ps(shuf, s);
    return _mm_cvtss_f32(_mm_add_ss(s, shuf));
}

__m256 load_f16(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

__m256 load_q8(const std::int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

float half_to_float(std::uint16_t h) {
    return _cvtsh_ss(h);
}

void f32_to_f16(const float* in, std::uint16_t* out, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        // Round to nearest even, like tensor::f32_to_f16, so both paths store the same bits.
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    }
    for (; i < n; ++i) {
        out[i] = static_cast<std::uint16_t>(_cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT));
    }
}

void f16_to_f32(const std::uint16_t* in, float* out, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load_f16(in + i));
    for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

float dot_f32(const float* k, const float* q, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), _mm256_loadu_ps(q + i), acc);
    float sum = hsum(acc);
    for (; i < n; ++i) sum += k[i] * q[i];
    return sum;
}

float dot_f16(const std::uint16_t* k, const float* q, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(load_f16(k + i), _mm256_loadu_ps(q + i), acc);
    float sum = hsum(acc);
    for (; i < n; ++i) sum += half_to_float(k[i]) * q[i];
    return sum;
}

float dot_q8(const std::int8_t* k, const float* q, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(load_q8(k + i), _mm256_loadu_ps(q + i), acc);
    float sum = hsum(acc);
    for (; i < n; ++i) sum += static_cast<float>(k[i]) * q[i];
    return sum;
}

void axpy_f32(const float* v, float w, float* acc, int n) {
    const __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(acc + i,
                         _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
    }
    for (; i < n; ++i) acc[i] += w * v[i];
}

void axpy_f16(const std::uint16_t* v, float w, float* acc, int n) {
    const __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, load_f16(v + i), _mm256_loadu_ps(acc + i)));
    }
    for (; i < n; ++i) acc[i] += w * half_to_float(v[i]);
}

void axpy_q8(const std::int8_t* v, float w, float* acc, int n) {
    const __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, load_q8(v + i), _mm256_loadu_ps(acc + i)));
    }
    for (; i < n; ++i) acc[i] += w * static_cast<float>(v[i]);
}

constexpr Kernels kAvx2{"avx2+fma+f16c", f32_to_f16, f16_to_f32, dot_f32, dot_f16,
                        dot_q8,          axpy_f32,   axpy_f16,   axpy_q8};

}  // namespace

// Only hands out the table: the CPU check lives in kv_storage.cpp, which is compiled for the
// baseline instruction set.
const Kernels& avx2_kernel_table() {
    return kAvx2;
}

}  // namespace tokenscope::kv::detail
