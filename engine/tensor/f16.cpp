#include "tensor/f16.h"

#include <bit>

namespace tokenscope::tensor {

namespace {

constexpr std::uint32_t kF32SignMask = 0x80000000u;
constexpr std::uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr std::uint32_t kF32Inf = 0x7F800000u;

constexpr std::uint16_t kF16Inf = 0x7C00u;
constexpr std::uint16_t kF16QuietBit = 0x0200u;

// |f| >= 65520 (= 65504 + half an ulp, a tie that rounds to the even neighbour, infinity).
constexpr std::uint32_t kF32HalfOverflow = 0x477FF000u;
// 2^-14, the smallest normal half.
constexpr std::uint32_t kF32HalfMinNormal = 0x38800000u;
// Exponent bias difference (127 - 15) placed in the float exponent field.
constexpr std::uint32_t kRebias = 112u << 23;

// Shifts `value` right by `shift` bits, rounding to nearest with ties to even.
std::uint32_t shift_right_rne(std::uint32_t value, unsigned shift) {
    const std::uint32_t kept = value >> shift;
    const std::uint32_t rest = value & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (kept & 1u) != 0)) return kept + 1u;
    return kept;
}

}  // namespace

float f16_to_f32(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1Fu;
    const std::uint32_t mantissa = h & 0x3FFu;

    if (exponent == 0x1Fu) {
        // Infinity or NaN: the payload moves to the top of the float mantissa.
        return std::bit_cast<float>(sign | kF32Inf | (mantissa << 13));
    }
    if (exponent == 0) {
        // Zero or subnormal: mantissa * 2^-24, which a float holds exactly.
        const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
        return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
    }
    return std::bit_cast<float>(sign | (((exponent << 23) + kRebias) | (mantissa << 13)));
}

std::uint16_t f32_to_f16(float f) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((bits & kF32SignMask) >> 16);
    const std::uint32_t magnitude = bits & kF32AbsMask;

    if (magnitude > kF32Inf) {
        // NaN: keep the top payload bits; a payload that would vanish becomes a quiet NaN.
        auto payload = static_cast<std::uint16_t>((magnitude >> 13) & 0x3FFu);
        if (payload == 0) payload = kF16QuietBit;
        return static_cast<std::uint16_t>(sign | kF16Inf | payload);
    }
    if (magnitude >= kF32HalfOverflow) return static_cast<std::uint16_t>(sign | kF16Inf);

    if (magnitude < kF32HalfMinNormal) {
        // Result is a subnormal half: round(|f| / 2^-24). |f| = m * 2^(e-150) with the implicit
        // bit in m, so |f| / 2^-24 = m >> (126 - e).
        const std::uint32_t exponent = magnitude >> 23;
        const unsigned shift = 126u - exponent;  // >= 14 because exponent <= 112
        // m < 2^24, so a shift of 25 or more leaves less than one half: rounds to zero. This also
        // covers float subnormals (exponent 0), which are far below 2^-25.
        if (shift >= 25u) return sign;
        const std::uint32_t m = (magnitude & 0x7FFFFFu) | 0x800000u;
        // Rounding up from 0x3FF yields 0x400, the encoding of the smallest normal: correct.
        return static_cast<std::uint16_t>(sign | shift_right_rne(m, shift));
    }

    // Normal: rebias the exponent and drop 13 mantissa bits. A carry out of the mantissa moves
    // into the exponent, which is the right result (it cannot reach infinity, checked above).
    return static_cast<std::uint16_t>(sign | shift_right_rne(magnitude - kRebias, 13));
}

float bf16_to_f32(std::uint16_t b) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::uint16_t f32_to_bf16(float f) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    if ((bits & kF32AbsMask) > kF32Inf) {
        return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // set the quiet bit
    }
    // Finite or infinite: a carry out of the mantissa rounds up into the exponent, and the
    // largest finite values round to infinity, as round-to-nearest-even requires.
    return static_cast<std::uint16_t>(shift_right_rne(bits, 16));
}

}  // namespace tokenscope::tensor
