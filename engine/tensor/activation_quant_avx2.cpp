// AVX2 forms of activation_quant.cpp's row quantizers (Q8_32 with its interleaved copy, and
// Q8_256), byte for byte the same output.
//
// Why: the scalar loops ran at 2-3 ns per float (GCC keeps the max|x| reduction scalar without
// -ffast-math, and the baseline build has no AVX). A 512-token prefill of a 246M model converts
// about 48 M floats, which made the conversion some 15 % of the prefill and 3-5 % of a decode
// step.
//
// Same results: amax, d = amax / 127 and id = 1 / d are computed as in the scalar code; x * id
// is one rounded product (no FMA), clamped with the operands in the order that keeps the scalar
// std::min/std::max answers for NaN, and rounded by cvtps2dq in the default nearest-even mode,
// which the scalar code's 1.5 * 2^23 trick also gives for |v| <= 127. Block sums are exact
// integers. test_matmul compares both at every level byte for byte.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/matmul_internal.h"

namespace tokenscope::tensor::detail {

namespace {

// max(acc, |x|) for 8 floats: the sign bit cleared, then max with acc as the operand that a
// NaN |x| leaves in place (std::max(amax, NaN) keeps amax too).
inline __m256 max_abs(__m256 acc, __m256 x) {
    const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    return _mm256_max_ps(abs, acc);
}

inline float horizontal_max(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

inline int horizontal_sum(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

// round(min(127, max(-127, x * id))) as int32 lanes.
inline __m256i quantize8(__m256 x, __m256 id) {
    __m256 v = _mm256_mul_ps(x, id);
    v = _mm256_max_ps(v, _mm256_set1_ps(-127.0f));
    v = _mm256_min_ps(v, _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(v);
}

// 32 int32 lanes (four vectors, in element order) to 32 int8 in element order.
inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    // packs works within 128-bit halves: the result holds the elements' 4-byte groups in the
    // order 0 2 4 6 1 3 5 7; the permute puts them back.
    const __m256i ab = _mm256_packs_epi32(a, b);
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i bytes = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// d = max|x| / 127 over `vectors` vectors of x, and its reciprocal (0 for an all-zero block).
inline float block_scale(const float* x, int vectors, __m256& id) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < vectors; ++i) acc = max_abs(acc, _mm256_loadu_ps(x + 8 * i));
    const float d = horizontal_max(acc) / 127.0f;
    id = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    return d;
}

}  // namespace

void quantize_row_q8_32_avx2(const float* x, std::int64_t n, std::uint8_t* row,
                             std::size_t scale_offset, std::size_t sum_offset,
                             std::size_t interleaved_offset) {
    auto* d = reinterpret_cast<float*>(row + scale_offset);
    auto* s = reinterpret_cast<float*>(row + sum_offset);
    std::uint8_t* interleaved = row + interleaved_offset;
    for (std::int64_t b = 0; b < n / 32; ++b) {
        const float* xb = x + 32 * b;
        __m256 id;
        d[b] = block_scale(xb, 4, id);
        const __m256i q0 = quantize8(_mm256_loadu_ps(xb), id);
        const __m256i q1 = quantize8(_mm256_loadu_ps(xb + 8), id);
        const __m256i q2 = quantize8(_mm256_loadu_ps(xb + 16), id);
        const __m256i q3 = quantize8(_mm256_loadu_ps(xb + 24), id);
        const int sum =
            horizontal_sum(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
        s[b] = d[b] * static_cast<float>(sum);
        const __m256i q = pack32(q0, q1, q2, q3);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 32 * b), q);
        // Word v of block b to byte 64 v + 4 (b % 16) of its 16-block group (matmul.h).
        alignas(32) std::uint32_t words[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(words), q);
        std::uint8_t* dst = interleaved + (b / 16) * 512 + (b % 16) * 4;
        for (int v = 0; v < 8; ++v) std::memcpy(dst + 64 * v, &words[v], 4);
    }
}

void quantize_row_q8_256_avx2(const float* x, std::int64_t n, std::uint8_t* row,
                              std::size_t scale_offset, std::size_t sum_offset) {
    auto* d = reinterpret_cast<float*>(row + scale_offset);
    auto* s16 = reinterpret_cast<float*>(row + sum_offset);
    for (std::int64_t b = 0; b < n / 256; ++b) {
        const float* xb = x + 256 * b;
        __m256 id;
        d[b] = block_scale(xb, 32, id);
        for (int g = 0; g < 8; ++g) {  // 32 elements at a time: two sums of 16
            const float* xg = xb + 32 * g;
            const __m256i q0 = quantize8(_mm256_loadu_ps(xg), id);
            const __m256i q1 = quantize8(_mm256_loadu_ps(xg + 8), id);
            const __m256i q2 = quantize8(_mm256_loadu_ps(xg + 16), id);
            const __m256i q3 = quantize8(_mm256_loadu_ps(xg + 24), id);
            s16[16 * b + 2 * g] =
                d[b] * static_cast<float>(horizontal_sum(_mm256_add_epi32(q0, q1)));
            s16[16 * b + 2 * g + 1] =
                d[b] * static_cast<float>(horizontal_sum(_mm256_add_epi32(q2, q3)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 256 * b + 32 * g),
                                pack32(q0, q1, q2, q3));
        }
    }
}

}  // namespace tokenscope::tensor::detail
