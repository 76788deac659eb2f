#pragma once
// Small helpers shared by the quantizers.
#include <cmath>
#include <cstdint>

#include "tensor/f16.h"

namespace tokenscope::tensor::detail {

// Nearest integer to v (ties to even), clamped to [lo, hi]. Clamping happens before the
// conversion so that huge values, infinities and NaN (which maps to lo) never reach an
// out-of-range float -> int conversion, which would be undefined behaviour.
inline int round_clamp(float v, int lo, int hi) {
    if (!(v > static_cast<float>(lo))) return lo;
    if (v >= static_cast<float>(hi)) return hi;
    return static_cast<int>(std::nearbyint(v));
}

// A scale as it will be read back: the quantizers compute the integer codes against the
// f16-rounded value, not the exact one, so that rounding of the stored scale does not add a
// systematic error to every element.
struct HalfScale {
    std::uint16_t bits;
    float value;
};

inline HalfScale to_half_scale(float v) {
    const std::uint16_t bits = f32_to_f16(v);
    return {bits, f16_to_f32(bits)};
}

}  // namespace tokenscope::tensor::detail
