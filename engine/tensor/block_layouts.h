#pragma once
// Byte layouts of the ggml quantized blocks, exactly as they are stored in GGUF files
// (little-endian). Every field is a byte array, so the structs have alignment 1 and no padding
// on any compiler, and a block may sit at any address inside an mmapped file. Half-precision
// scales are read with load_f16() below.
//
// Element order inside a block follows ggml; the comments on each struct say which bits hold
// element e, because that is the part that is easy to get wrong.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tensor/f16.h"
#include "tensor/type.h"

namespace tokenscope::tensor {

inline constexpr int QK4_0 = 32;
inline constexpr int QK4_1 = 32;
inline constexpr int QK5_0 = 32;
inline constexpr int QK5_1 = 32;
inline constexpr int QK8_0 = 32;
// Super-block size of the K-quants.
inline constexpr int QK_K = 256;
inline constexpr int K_SCALE_SIZE = 12;

inline float load_f16(const std::uint8_t (&bytes)[2]) {
    return f16_to_f32(static_cast<std::uint16_t>(bytes[0] | (bytes[1] << 8)));
}
inline void store_f16(std::uint8_t (&bytes)[2], std::uint16_t h) {
    bytes[0] = static_cast<std::uint8_t>(h & 0xFFu);
    bytes[1] = static_cast<std::uint8_t>(h >> 8);
}

// x[e] = d * (q[e] - 8). Element e < 16 is the low nibble of qs[e], element e >= 16 the high
// nibble of qs[e - 16].
struct BlockQ4_0 {
    std::uint8_t d[2];
    std::uint8_t qs[QK4_0 / 2];
};

// x[e] = d * q[e] + m, nibbles as in Q4_0.
struct BlockQ4_1 {
    std::uint8_t d[2];
    std::uint8_t m[2];
    std::uint8_t qs[QK4_1 / 2];
};

// x[e] = d * (q[e] - 16). Low 4 bits as in Q4_0; bit 4 of element e is bit e of the
// little-endian 32-bit word qh.
struct BlockQ5_0 {
    std::uint8_t d[2];
    std::uint8_t qh[4];
    std::uint8_t qs[QK5_0 / 2];
};

// x[e] = d * q[e] + m, bits as in Q5_0.
struct BlockQ5_1 {
    std::uint8_t d[2];
    std::uint8_t m[2];
    std::uint8_t qh[4];
    std::uint8_t qs[QK5_1 / 2];
};

// The 32-element formats with 4-bit codes (Q4_0, Q4_1, Q5_0, Q5_1) as the kernels that read
// them in place see them: block size, where the 16 nibble bytes and Q5's fifth bits start, and
// the term a block adds besides d * sum(q * x): a min m (Q4_1, Q5_1) or -offset * d (Q4_0: 8,
// Q5_0: 16), either times the sum of x over the block.
template <Type W>
struct NibbleLayout {
    static_assert(W == Type::Q4_0 || W == Type::Q4_1 || W == Type::Q5_0 || W == Type::Q5_1);
    using Block = std::conditional_t<
        W == Type::Q4_0, BlockQ4_0,
        std::conditional_t<W == Type::Q4_1, BlockQ4_1,
                           std::conditional_t<W == Type::Q5_0, BlockQ5_0, BlockQ5_1>>>;
    static constexpr std::size_t kBlockBytes = sizeof(Block);
    static constexpr std::size_t kNibbles = offsetof(Block, qs);
    static constexpr bool kHasMin = W == Type::Q4_1 || W == Type::Q5_1;
    static constexpr bool kFifth = W == Type::Q5_0 || W == Type::Q5_1;
    // Where the fifth bits start (Q5_0, Q5_1; 0 for the others).
    static constexpr std::size_t kFifthBits = kFifth ? kNibbles - 4 : 0;
    static constexpr float kOffset = W == Type::Q4_0 ? 8.0f : W == Type::Q5_0 ? 16.0f : 0.0f;
};

// x[e] = d * qs[e], qs signed.
struct BlockQ8_0 {
    std::uint8_t d[2];
    std::int8_t qs[QK8_0];
};

// 16 sub-blocks of 16. x[e] = d * sc[s] * q[e] - dmin * m[s] with s = e / 16, where
// scales[s] = sc | m << 4 (4 bits each) and q[e] (2 bits) sits in qs[32*(e/128) + e%32] at
// bit 2*((e%128)/32).
struct BlockQ2_K {
    std::uint8_t scales[QK_K / 16];
    std::uint8_t qs[QK_K / 4];
    std::uint8_t d[2];
    std::uint8_t dmin[2];
};

// 16 sub-blocks of 16. x[e] = d * (sc[s] - 32) * q[e], q[e] in [-4, 3]: the low 2 bits as in
// Q2_K, and q[e] = low2 - 4 unless bit (e/32) of hmask[e%32] is set. The 6-bit sc[s]: low 4 bits
// in scales[s % 8] (low nibble for s < 8, high nibble otherwise), high 2 bits in
// scales[8 + s%4] at bit 2*(s/4).
struct BlockQ3_K {
    std::uint8_t hmask[QK_K / 8];
    std::uint8_t qs[QK_K / 4];
    std::uint8_t scales[12];
    std::uint8_t d[2];
};

// 8 sub-blocks of 32. x[e] = d * sc[s] * q[e] - dmin * m[s], s = e / 32. q[e] is the low nibble
// of qs[32*(e/64) + e%32] for even s, the high nibble for odd s. 6-bit sc/m packing: see
// unpack_scale_min_k4() in kquant_scales.h.
struct BlockQ4_K {
    std::uint8_t d[2];
    std::uint8_t dmin[2];
    std::uint8_t scales[K_SCALE_SIZE];
    std::uint8_t qs[QK_K / 2];
};

// As Q4_K with a fifth bit: bit s of qh[e % 32] adds 16 to q[e].
struct BlockQ5_K {
    std::uint8_t d[2];
    std::uint8_t dmin[2];
    std::uint8_t scales[K_SCALE_SIZE];
    std::uint8_t qh[QK_K / 8];
    std::uint8_t qs[QK_K / 2];
};

// 16 sub-blocks of 16. x[e] = d * scales[s] * (q[e] - 32), s = e / 16, q 6 bits. With
// e = 128n + 32k + l: the low 4 bits are in ql[64n + 32*(k%2) + l] (low nibble for k < 2, high
// for k >= 2), the high 2 bits in qh[32n + l] at bit 2k.
struct BlockQ6_K {
    std::uint8_t ql[QK_K / 2];
    std::uint8_t qh[QK_K / 4];
    std::int8_t scales[QK_K / 16];
    std::uint8_t d[2];
};

// The sizes ggml and GGUF files use; a mismatch here would misread every tensor.
static_assert(sizeof(BlockQ4_0) == 18 && alignof(BlockQ4_0) == 1);
static_assert(sizeof(BlockQ4_1) == 20 && alignof(BlockQ4_1) == 1);
static_assert(sizeof(BlockQ5_0) == 22 && alignof(BlockQ5_0) == 1);
static_assert(sizeof(BlockQ5_1) == 24 && alignof(BlockQ5_1) == 1);
static_assert(sizeof(BlockQ8_0) == 34 && alignof(BlockQ8_0) == 1);
static_assert(sizeof(BlockQ2_K) == 84 && alignof(BlockQ2_K) == 1);
static_assert(sizeof(BlockQ3_K) == 110 && alignof(BlockQ3_K) == 1);
static_assert(sizeof(BlockQ4_K) == 144 && alignof(BlockQ4_K) == 1);
static_assert(sizeof(BlockQ5_K) == 176 && alignof(BlockQ5_K) == 1);
static_assert(sizeof(BlockQ6_K) == 210 && alignof(BlockQ6_K) == 1);

}  // namespace tokenscope::tensor
