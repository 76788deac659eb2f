#pragma once
// tensor::Type ids (ggml/GGUF type ids) as plain constants, for CUDA code that cannot include
// engine/tensor/type.h. kernels/selftest/ops_selftest.cpp static_asserts that they match.
#include <cstdint>

namespace tokenscope::cuda::ops::dq {

inline constexpr std::uint32_t kF32 = 0;
inline constexpr std::uint32_t kF16 = 1;
inline constexpr std::uint32_t kQ4_0 = 2;
inline constexpr std::uint32_t kQ4_1 = 3;
inline constexpr std::uint32_t kQ5_0 = 6;
inline constexpr std::uint32_t kQ5_1 = 7;
inline constexpr std::uint32_t kQ8_0 = 8;
inline constexpr std::uint32_t kQ2_K = 10;
inline constexpr std::uint32_t kQ3_K = 11;
inline constexpr std::uint32_t kQ4_K = 12;
inline constexpr std::uint32_t kQ5_K = 13;
inline constexpr std::uint32_t kQ6_K = 14;
inline constexpr std::uint32_t kBF16 = 30;

}  // namespace tokenscope::cuda::ops::dq
