#pragma once
// Weight matrices whose rows are stored interleaved, 16 rows to a group, in the order the
// AVX2 integer tiles read them (lanes = rows), instead of one row after another as in the file.
//
// Why: the row-order decode kernels multiply one row at a time with the 32 elements of a block
// across the vector lanes, so every (row, block) ends in float work of its own (convert, scale,
// FMA) and every row in a horizontal sum; on a Zen 3 core a one-token Q8_0 product took
// 5.1-5.4 cycles per (row, block). With eight rows in the lanes that work is shared by eight
// rows and the block's integer sum is exact before it is scaled: 2.1-2.5 cycles for one token
// and 1.8-2.0 for 2-13 (docs/benchmarks.md, twenty-second pass). The lane GEMMs of prefill
// built this order themselves for every call (about 10 cycles per (row, block) of packing,
// which made them slower than the row kernels below 5-6 tokens); stored once at load, every
// token count takes the lane order, so decode, speculative verification and prefill compute
// the same bits for a token.
//
// Group g holds rows 16g..16g+15, in the bytes those 16 rows occupy in the file (16 * nb *
// block bytes, nb = n / 32 blocks per row, n / 256 super-blocks for the K-quants), block after
// block, so that a tile of the group reads one sequential stream (two streams per thread, one
// per 8 rows with the scales apart, read 8-10 % slower from memory on Zen 3). Block b of a
// group is 16 blocks' bytes:
//   codes:  [half 0..1][word w][row 0..7][4 bytes]  bytes 4w..4w+3 of the codes of row
//           8 * half + row (Q8_0: 8 words of the 32 int8 codes; Q4_0/Q4_1/Q5_0/Q5_1: 4 words
//           of the 16 nibble bytes, whose low nibbles are elements 4w..4w+3 and high nibbles
//           16+4w..; Q4_K: 32 words of the 128 nibble bytes, word w's low nibbles elements
//           64 (w / 8) + 4 (w % 8).. and its high nibbles the same + 32, Q5_K likewise; Q6_K:
//           32 words of ql; Q2_K/Q3_K: 16 words of qs)
//   high:   [half 0..1][word][row 0..7][4 bytes]    Q5_0/Q5_1: the blocks' qh (one word);
//                                                   Q5_K: the 8 words of qh; Q6_K: the 16 of qh;
//                                                   Q3_K: the 8 of hmask
//   sub:    [half 0..1][word][row 0..7][4 bytes]    Q4_K/Q5_K: the 3 words of 6-bit sub-block
//                                                   scales and mins, as in the file; Q6_K: the
//                                                   4 words of int8 scales; Q3_K: the 3 words of
//                                                   packed 6-bit scales; Q2_K: the 4 words of
//                                                   scale (low) and min (high) nibbles
//   scales: [row 0..15]                             the blocks' f16 d
//   mins:   [row 0..15]                             Q4_1/Q5_1: the blocks' f16 m; Q2_K, Q4_K,
//                                                   Q5_K: dmin
#include <cstddef>
#include <cstdint>

#include "tensor/type.h"

namespace tokenscope::tensor {

enum class RowLayout {
    Rows,        // the file's order
    Interleaved  // groups of 16 rows as above (Q8_0, Q4_0-Q5_1, Q2_K-Q6_K)
};

inline constexpr std::int64_t kInterleavedGroupRows = 16;

// Where the parts above lie inside one block of a group (16 blocks of the file), in bytes from
// the block's start. The one description of the layout: interleave_rows, the AVX2 tile and the
// lane GEMM's packer all read it.
struct InterleavedBlock {
    std::size_t elements = 32;   // of a row per block: 32, or 256 for the K-quants' super-blocks
    std::size_t codes = 0;       // bytes of codes of 8 rows (half 1 starts here)
    std::size_t high_bits =
        0;  // the 16 rows' high bits (qh of Q5_0, Q5_1, Q5_K, Q6_K; Q3_K's hmask)
    std::size_t sub_scales = 0;  // the 16 rows' sub-block scales (with the mins: Q2_K, Q4_K, Q5_K)
    std::size_t scales = 0;      // the 16 rows' d
    std::size_t mins = 0;        // the 16 rows' m (Q4_1/Q5_1) or dmin (Q2_K/Q4_K/Q5_K)
    std::size_t bytes = 0;       // the whole block of the group
    std::size_t high_bytes = 0;  // of one row: 4 (Q5_0/Q5_1), 32 (Q5_K, Q3_K), 64 (Q6_K)
    std::size_t sub_scale_bytes = 0;  // of one row: 12 (Q3_K/Q4_K/Q5_K), 16 (Q2_K/Q6_K)
    constexpr bool has_high_bits() const { return high_bytes > 0; }
    constexpr bool has_mins() const { return bytes > mins; }
    constexpr bool has_sub_scales() const { return sub_scale_bytes > 0; }
};

// Only ever evaluated at compile time (the AVX2 files must not share runtime inline code with
// baseline ones, matmul_internal.h). Per row of a block: code bytes, high-bit bytes, sub-block
// scale bytes, whether it has a min. High bits and sub-block scales lie as the codes do,
// [half][word][row 0..7][4 bytes].
consteval InterleavedBlock make_interleaved_block(std::size_t elements, std::size_t code_bytes,
                                                  std::size_t high_bytes,
                                                  std::size_t sub_scale_bytes, bool mins) {
    InterleavedBlock b;
    b.elements = elements;
    b.codes = 8 * code_bytes;
    b.high_bits = 2 * b.codes;
    b.sub_scales = b.high_bits + 16 * high_bytes;
    b.scales = b.sub_scales + 16 * sub_scale_bytes;
    b.mins = b.scales + 16 * 2;
    b.bytes = b.mins + (mins ? 16 * 2 : 0);
    b.high_bytes = high_bytes;
    b.sub_scale_bytes = sub_scale_bytes;
    return b;
}

consteval InterleavedBlock make_interleaved_block_of(Type w) {
    switch (w) {
        case Type::Q4_0:
            return make_interleaved_block(32, 16, 0, 0, false);
        case Type::Q4_1:
            return make_interleaved_block(32, 16, 0, 0, true);
        case Type::Q5_0:
            return make_interleaved_block(32, 16, 4, 0, false);
        case Type::Q5_1:
            return make_interleaved_block(32, 16, 4, 0, true);
        case Type::Q4_K:
            return make_interleaved_block(256, 128, 0, 12, true);
        case Type::Q5_K:
            return make_interleaved_block(256, 128, 32, 12, true);
        case Type::Q6_K:
            return make_interleaved_block(256, 128, 64, 16, false);
        case Type::Q3_K:
            return make_interleaved_block(256, 64, 32, 12, false);
        case Type::Q2_K:
            return make_interleaved_block(256, 64, 0, 16, true);
        default:  // Q8_0
            return make_interleaved_block(32, 32, 0, 0, false);
    }
}

// The layout of `type` (one of the ten; Q8_0 for any other, which has none).
template <Type W>
inline constexpr InterleavedBlock kInterleavedBlock = make_interleaved_block_of(W);

// Whether `type` has an interleaved layout at all: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
bool has_interleaved_layout(Type type);

// kInterleavedBlock of a type known only at run time; InvalidArgument for a type without one.
const InterleavedBlock& interleaved_block(Type type);

// Whether a rows x n matrix of `type` can be stored interleaved: one of the ten types, with rows
// a multiple of 16 (and n of the type's block).
bool can_interleave(Type type, std::int64_t rows, std::int64_t n);

// Whether the active SIMD level multiplies `type` faster interleaved: every type at the AVX2
// level (its tiles above); at the AVX-512 level Q4_0, Q4_1, Q5_0 and Q5_1 (their AVX-512 tile,
// interleaved_q32_avx512.cpp, for decode, the AVX-512 lane GEMM reading the groups for
// prefill) and the K-quants (their own
// AVX-512 tile, interleaved_kquant_avx512.cpp, and the AVX-512 K-quant lane GEMM reading the
// groups), while Q8_0 keeps the file's order for the AVX-512 row kernels, which measured as
// fast there. The scalar
// kernels read interleaved rows only by copying each group back.
// TOKENSCOPE_INTERLEAVE=0 in the environment says no, to compare the two. (simd_dispatch.cpp)
bool interleaving_pays(Type type);

// Writes the interleaved form of rows x n `type` rows (file order, at `rows_in`) to `out`,
// which has the same size and must not overlap rows_in. Throws InvalidArgument when
// !can_interleave(type, rows, n).
void interleave_rows(Type type, const std::uint8_t* rows_in, std::int64_t rows, std::int64_t n,
                     std::uint8_t* out);

// Row r of an interleaved matrix (data as interleave_rows wrote it) in the file's order, into
// row_out (row_bytes(type, n) bytes).
void row_from_interleaved(Type type, const std::uint8_t* data, std::int64_t n, std::int64_t r,
                          std::uint8_t* row_out);

}  // namespace tokenscope::tensor
