#pragma once
// IEEE 754 binary16 ("half") and bfloat16 <-> float conversions, written with integer
// arithmetic so that results are identical on every compiler and CPU (no _Float16, no F16C):
// weights converted here must match what llama.cpp wrote bit for bit.
#include <cstdint>

namespace tokenscope::tensor {

// Exact: every half value is a float. NaN payloads and signs are kept.
float f16_to_f32(std::uint16_t h);

// Round to nearest, ties to even. Values at or above 65520 in magnitude become infinity;
// results below the smallest normal (2^-14) become subnormals, and below 2^-25 become +-0.
// NaN stays NaN with its sign and the top 10 bits of its payload (made non-zero so it does not
// turn into infinity).
std::uint16_t f32_to_f16(float f);

// Exact: a bfloat16 is the upper half of a float.
float bf16_to_f32(std::uint16_t b);

// Round to nearest, ties to even; NaN stays NaN (quieted, sign kept) rather than being rounded,
// because rounding could carry a NaN payload into the exponent and produce infinity.
std::uint16_t f32_to_bf16(float f);

}  // namespace tokenscope::tensor
