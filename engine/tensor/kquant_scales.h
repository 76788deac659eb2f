#pragma once
// Packing of the 6-bit sub-block scales of the K-quants, shared by the dequantizers and the
// quantizers so that the two can never disagree about a bit position.
#include <cstdint>

namespace tokenscope::tensor {

// Q4_K / Q5_K: 8 scales and 8 mins of 6 bits in 12 bytes. Bytes 0-3 hold sc[0..3] in their low
// 6 bits, bytes 4-7 hold m[0..3]; bytes 8-11 hold the low 4 bits of sc[4..7] (low nibble) and
// m[4..7] (high nibble); the top 2 bits of sc[4..7] / m[4..7] sit in bits 6-7 of bytes 0-3 / 4-7.
struct ScaleMin {
    std::uint8_t scale;
    std::uint8_t min;
};

inline ScaleMin unpack_scale_min_k4(int sub_block, const std::uint8_t* scales) {
    const int j = sub_block;
    if (j < 4) {
        return {static_cast<std::uint8_t>(scales[j] & 63),
                static_cast<std::uint8_t>(scales[j + 4] & 63)};
    }
    return {static_cast<std::uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4)),
            static_cast<std::uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))};
}

// sc[0..7] and m[0..7] must be < 64.
inline void pack_scale_min_k4(const std::uint8_t* sc, const std::uint8_t* m, std::uint8_t* scales) {
    for (int j = 0; j < 4; ++j) {
        scales[j] = static_cast<std::uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
        scales[j + 4] = static_cast<std::uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
        scales[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

// Q3_K: 16 unsigned 6-bit values u[s] (the signed scale is u[s] - 32) in 12 bytes. Low 4 bits
// of u[s] in scales[s % 8] (low nibble for s < 8, high nibble for s >= 8); the high 2 bits in
// scales[8 + s % 4] at bit 2 * (s / 4).
inline int unpack_scale_q3_k(int s, const std::uint8_t* scales) {
    const int low = s < 8 ? (scales[s] & 0xF) : (scales[s - 8] >> 4);
    const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// `u` must be < 64.
inline void pack_scales_q3_k(const std::uint8_t (&u)[16], std::uint8_t* scales) {
    for (int i = 0; i < 12; ++i) scales[i] = 0;
    for (int s = 0; s < 16; ++s) {
        const int low = u[s] & 0xF;
        scales[s % 8] = static_cast<std::uint8_t>(scales[s % 8] | (s < 8 ? low : low << 4));
        const int high = (u[s] >> 4) & 3;
        scales[8 + s % 4] = static_cast<std::uint8_t>(scales[8 + s % 4] | (high << (2 * (s / 4))));
    }
}

}  // namespace tokenscope::tensor
