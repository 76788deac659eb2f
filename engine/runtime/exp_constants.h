#pragma once
// The constants of the vector exp for non-positive arguments (Cephes' expf; see exp_avx2.h for
// the method and its measured error), shared by the 8-lane (exp_avx2.h) and 16-lane
// (cpu_ops_avx512.cpp) forms, which must compute the same bits. Constants only, so the header
// is safe in files built for any instruction set.
namespace tokenscope::runtime::simd::exp_constants {

inline constexpr float kLowest = -87.33654f;  // about ln(FLT_MIN): below it the result is 0
inline constexpr float kLog2e = 1.44269504088896341f;
// ln 2 in two parts (Cody-Waite): n * kLn2Hi is exact in float.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
// exp(r) = 1 + r + r^2 P(r), P's coefficients from the highest power down.
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace tokenscope::runtime::simd::exp_constants
