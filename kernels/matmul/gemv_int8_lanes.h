#pragma once
// The per-lane arithmetic and lane layout of the int8 GEMVs (matmul_gemv_int8_q8_0.cu,
// matmul_gemv_int8_q4_k.cu), in a header plain C++ can include: the kernels call these functions
// on the device, and tests/kernels/test_gemv_int8_lanes.cpp runs them on the CPU over a whole
// emulated warp against the engine's own dequantizers, on machines without a GPU. The loads stay
// in the kernels (they are what differs between the two sides); which bytes a lane loads is
// decided here.
#include <cstdint>

#ifndef TOKENSCOPE_HD
#if defined(__CUDACC__)
#define TOKENSCOPE_HD __host__ __device__
#else
#define TOKENSCOPE_HD
#endif
#endif

namespace tokenscope::cuda::int8 {

// Four int8 products of the bytes of a and b, summed into c (the __dp4a instruction; on the host
// the same sum written out).
TOKENSCOPE_HD inline int dp4a(int a, int b, int c) {
#if defined(__CUDA_ARCH__)
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; ++i) {
        const auto ai = static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<unsigned>(a) >> (8 * i)));
        const auto bi = static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<unsigned>(b) >> (8 * i)));
        c += static_cast<int>(ai) * static_cast<int>(bi);
    }
    return c;
#endif
}

// Q8_0: 4 lanes per 32-element block, 8 blocks per warp step; lane `part` (lane % 4) takes quants
// 8 * part .. 8 * part + 7: bytes 2 + 8 * part .. of the block (w0, w1 little-endian words) and
// activation bytes 8 * part .. of the block (x0, x1).
inline constexpr int kQ8_0LanesPerBlock = 4;
TOKENSCOPE_HD inline float q8_0_lane(float d_w, float d_x, int w0, int w1, int x0, int x1) {
    return d_w * d_x * static_cast<float>(dp4a(w1, x1, dp4a(w0, x0, 0)));
}

// Q4_K: 8 lanes per 256-element super-block, 4 super-blocks per warp step. Lane `part`
// (lane % 8) loads qs bytes 16 * part .. 16 * part + 15, whose low nibbles are elements
// first .. first + 15 of the super-block and high nibbles first + 32 .. first + 47, where
// first = 64 * group + offset; they belong to sub-blocks 2 * group (low) and 2 * group + 1
// (high), which are also the activation's blocks of 32 (scale index 8 * b + 2 * group (+1)).
inline constexpr int kQ4_KLanesPerBlock = 8;
struct Q4KLane {
    int group;   // 0..3
    int offset;  // 0 or 16
    TOKENSCOPE_HD int qs_byte() const { return 16 * (2 * group + offset / 16); }
    TOKENSCOPE_HD int first() const { return 64 * group + offset; }
};
TOKENSCOPE_HD inline Q4KLane q4_k_lane(int part) { return {part / 2, 16 * (part % 2)}; }

// One lane's share of one super-block: w = its 16 bytes of nibbles as 4 words, lo_x / hi_x the
// 16 int8 activations under the low / high nibbles as 4 words each; d, dmin the super-block's
// scales, sc/m the two sub-blocks' 6-bit scale and min, dx the two activation block scales.
//   dx_lo * (d sc_lo sum q_e x_e - dmin m_lo sum x_e) + the same for the high nibbles
TOKENSCOPE_HD inline float q4_k_lane_sum(const unsigned (&w)[4], const int (&lo_x)[4], const int (&hi_x)[4], float d,
                                         float dmin, int sc_lo, int m_lo, int sc_hi, int m_hi, float dx_lo,
                                         float dx_hi) {
    int dot_lo = 0, dot_hi = 0, sum_lo = 0, sum_hi = 0;
    for (int k = 0; k < 4; ++k) {
        dot_lo = dp4a(static_cast<int>(w[k] & 0x0F0F0F0Fu), lo_x[k], dot_lo);
        dot_hi = dp4a(static_cast<int>((w[k] >> 4) & 0x0F0F0F0Fu), hi_x[k], dot_hi);
        sum_lo = dp4a(0x01010101, lo_x[k], sum_lo);
        sum_hi = dp4a(0x01010101, hi_x[k], sum_hi);
    }
    return dx_lo * (d * static_cast<float>(sc_lo) * static_cast<float>(dot_lo) -
                    dmin * static_cast<float>(m_lo) * static_cast<float>(sum_lo)) +
           dx_hi * (d * static_cast<float>(sc_hi) * static_cast<float>(dot_hi) -
                    dmin * static_cast<float>(m_hi) * static_cast<float>(sum_hi));
}

}  // namespace tokenscope::cuda::int8
