#pragma once
// Loads shared by the AVX-512 tiles over interleaved groups of 16 rows (interleaved_rows.h):
// interleaved_kquant_avx512.cpp and interleaved_q32_avx512.cpp. Only files compiled with the
// AVX-512 options may include it (see matmul_internal.h); the unnamed namespace gives each its
// own copy.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace tokenscope::tensor::detail {
namespace {

// The 32 bytes of rows 0-7 at p and those of rows 8-15 at p + half_stride (the group's two
// stored halves) as one register: lane r holds row r's 4 bytes.
inline __m512i both_halves(const std::uint8_t* p, std::size_t half_stride) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + half_stride));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// 16 consecutive f16 values (a group's scales: both halves' 8 side by side) as floats.
inline __m512 half16(const std::uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

}  // namespace
}  // namespace tokenscope::tensor::detail
