#pragma once
// kv::ElementType values for .cu files (compiled as C++17, which cannot include kv/kv_types.h).
// kernels/selftest/ops_selftest.cpp static_asserts that these match kv_types.h.
namespace tokenscope::kv {
enum class ElementType;
}

namespace tokenscope::cuda::ops::kvt {

inline constexpr int kF32 = 0;
inline constexpr int kF16 = 1;
inline constexpr int kQ8 = 2;

}  // namespace tokenscope::cuda::ops::kvt
