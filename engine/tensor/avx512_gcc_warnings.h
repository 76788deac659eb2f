#pragma once
// Included first by the files compiled for AVX-512 (dot_avx512.cpp, direct_avx512.cpp,
// gemm_int8_avx512.cpp). GCC 12's _mm512_undefined_*(), used inside cvtepi32_ps, cvtph_ps,
// permutexvar and others, reads a self-initialized variable and trips -Wmaybe-uninitialized
// (GCC bug 105593, fixed in 13). Diagnostic pragmas hold to the end of the including file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
