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

// Lane i of the result: the maximum of v[i]'s eight lanes (three levels of pairwise maxima
// with the vectors' lanes interleaved, 21 instructions for eight vectors).
inline __m256 lane_max_of_8(const __m256 (&v)[8]) {
    __m256 t[4];
    for (int i = 0; i < 4; ++i) {
        // Per 128-bit half: [a0 b0 a1 b1] and [a2 b2 a3 b3], max: a's and b's partials.
        t[i] = _mm256_max_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                             _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    }
    __m256 u[2];
    for (int i = 0; i < 2; ++i) {
        // Per half: one partial of each of four vectors.
        u[i] = _mm256_max_ps(_mm256_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    return _mm256_max_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20),
                         _mm256_permute2f128_ps(u[0], u[1], 0x31));
}

// Lane i of the result: the sum of v[i]'s eight int32 lanes (as lane_max_of_8).
inline __m256i lane_sum_of_8(const __m256i (&v)[8]) {
    __m256i t[4];
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    }
    __m256i u[2];
    for (int i = 0; i < 2; ++i) {
        const __m256 a = _mm256_castsi256_ps(t[2 * i]);
        const __m256 b = _mm256_castsi256_ps(t[2 * i + 1]);
        u[i] =
            _mm256_add_epi32(_mm256_castps_si256(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0))),
                             _mm256_castps_si256(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2))));
    }
    return _mm256_add_epi32(_mm256_permute2x128_si256(u[0], u[1], 0x20),
                            _mm256_permute2x128_si256(u[0], u[1], 0x31));
}

// The 8 x 8 transpose of 32-bit words: out[v] holds word v of in[0..7].
inline void transpose_words_8x8(const __m256i (&in)[8], __m256i (&out)[8]) {
    __m256 a[8], b[8];
    for (int i = 0; i < 4; ++i) {
        const __m256 x = _mm256_castsi256_ps(in[2 * i]);
        const __m256 y = _mm256_castsi256_ps(in[2 * i + 1]);
        a[2 * i] = _mm256_unpacklo_ps(x, y);      // x0 y0 x1 y1 | x4 y4 x5 y5
        a[2 * i + 1] = _mm256_unpackhi_ps(x, y);  // x2 y2 x3 y3 | x6 y6 x7 y7
    }
    for (int i = 0; i < 2; ++i) {
        for (int h = 0; h < 2; ++h) {
            const __m256 x = a[4 * i + h];
            const __m256 y = a[4 * i + 2 + h];
            // Words 2h and 2h + 1 (and 4 more) of four rows.
            b[4 * i + 2 * h] = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(1, 0, 1, 0));
            b[4 * i + 2 * h + 1] = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 2, 3, 2));
        }
    }
    // b[4 i + w] (w < 4) holds word w of rows 4i..4i+3 in its low half and word w + 4 in its
    // high half.
    for (int w = 0; w < 4; ++w) {
        out[w] = _mm256_castps_si256(_mm256_permute2f128_ps(b[w], b[4 + w], 0x20));
        out[w + 4] = _mm256_castps_si256(_mm256_permute2f128_ps(b[w], b[4 + w], 0x31));
    }
}

// Eight blocks (256 values from x) of a Q8_32 row from block b, b a multiple of 8: the scales,
// reciprocals and sums eight at a time in the lanes, where the one-block loop below reduced
// each block horizontally and divided twice in scalar code. The same operations per value, so
// the same bytes. Prefill, 2 threads, AVX-512, tok/s, alternated three times: SmolLM2 128 tokens
// 2006-2067 -> 2096-2108, 512 tokens 2009-2025 -> 2029-2052; 246M Q8_0 128 / 512 (twice)
// 1457-1464 / 1586-1591 -> 1473-1493 / 1609-1611. AVX2 (TOKENSCOPE_SIMD=avx2) SmolLM2 did not
// move (1051-1059 / 981-1006 -> 1051-1059 / 988-999).
inline void quantize_8_blocks_q8_32(const float* x, std::int64_t b, std::uint8_t* row, float* d,
                                    float* s, std::uint8_t* interleaved, std::int32_t* isum) {
    __m256 part[8];
    for (int i = 0; i < 8; ++i) {
        const float* xb = x + 32 * (b + i);
        __m256 acc = _mm256_setzero_ps();
        for (int v = 0; v < 4; ++v) acc = max_abs(acc, _mm256_loadu_ps(xb + 8 * v));
        part[i] = acc;
    }
    const __m256 d8 = _mm256_div_ps(lane_max_of_8(part), _mm256_set1_ps(127.0f));
    const __m256 id8 = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), d8),
                                     _mm256_cmp_ps(d8, _mm256_setzero_ps(), _CMP_GT_OQ));
    alignas(32) float ids[8];
    _mm256_store_ps(ids, id8);
    __m256i sums[8], q[8];
    for (int i = 0; i < 8; ++i) {
        const float* xb = x + 32 * (b + i);
        const __m256 id = _mm256_broadcast_ss(ids + i);
        const __m256i q0 = quantize8(_mm256_loadu_ps(xb), id);
        const __m256i q1 = quantize8(_mm256_loadu_ps(xb + 8), id);
        const __m256i q2 = quantize8(_mm256_loadu_ps(xb + 16), id);
        const __m256i q3 = quantize8(_mm256_loadu_ps(xb + 24), id);
        sums[i] = _mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3));
        q[i] = pack32(q0, q1, q2, q3);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 32 * (b + i)), q[i]);
    }
    _mm256_storeu_ps(d + b, d8);
    const __m256i block_sums = lane_sum_of_8(sums);
    _mm256_storeu_ps(s + b, _mm256_mul_ps(d8, _mm256_cvtepi32_ps(block_sums)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(isum + b), block_sums);
    // Word v of blocks b..b+7 to bytes 64 v + 4 (b % 16) .. of their 16-block group.
    __m256i words[8];
    transpose_words_8x8(q, words);
    std::uint8_t* dst = interleaved + (b / 16) * 512 + (b % 16) * 4;
    for (int v = 0; v < 8; ++v)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 * v), words[v]);
}

}  // namespace

void quantize_row_q8_32_avx2(const float* x, std::int64_t n, std::uint8_t* row,
                             std::size_t scale_offset, std::size_t sum_offset,
                             std::size_t interleaved_offset, std::size_t int_sum_offset) {
    auto* d = reinterpret_cast<float*>(row + scale_offset);
    auto* s = reinterpret_cast<float*>(row + sum_offset);
    std::uint8_t* interleaved = row + interleaved_offset;
    auto* isum = reinterpret_cast<std::int32_t*>(row + int_sum_offset);
    const std::int64_t blocks = n / 32;
    std::int64_t b = 0;
    for (; b + 8 <= blocks; b += 8) quantize_8_blocks_q8_32(x, b, row, d, s, interleaved, isum);
    for (; b < blocks; ++b) {
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
        isum[b] = sum;
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
                              std::size_t scale_offset, std::size_t sum_offset,
                              std::size_t int_sum_offset) {
    auto* d = reinterpret_cast<float*>(row + scale_offset);
    auto* s16 = reinterpret_cast<float*>(row + sum_offset);
    auto* offset16 = reinterpret_cast<std::int32_t*>(row + int_sum_offset);
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
            const int sum0 = horizontal_sum(_mm256_add_epi32(q0, q1));
            const int sum1 = horizontal_sum(_mm256_add_epi32(q2, q3));
            s16[16 * b + 2 * g] = d[b] * static_cast<float>(sum0);
            s16[16 * b + 2 * g + 1] = d[b] * static_cast<float>(sum1);
            offset16[16 * b + 2 * g] = -4 * sum0;
            offset16[16 * b + 2 * g + 1] = -4 * sum1;
            offset16[n / 16 + 16 * b + 2 * g] = low_int16(-4 * sum0);
            offset16[n / 16 + 16 * b + 2 * g + 1] = low_int16(-4 * sum1);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 256 * b + 32 * g),
                                pack32(q0, q1, q2, q3));
        }
    }
}

}  // namespace tokenscope::tensor::detail
