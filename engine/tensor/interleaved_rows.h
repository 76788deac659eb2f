#pragma once
// Weight matrices whose rows are stored interleaved, eight rows to a group, in the order the
// AVX2 integer tiles read them (lanes = rows), instead of one row after another as in the file.
//
// Why: the row-order decode kernels multiply one row at a time with the 32 elements of a block
// across the vector lanes, so every (row, block) ends in float work of its own (convert, scale,
// FMA) and every row in a horizontal sum; on a Zen 3 core a one-token Q8_0 product took
// 5.1-5.4 cycles per (row, block). With eight rows in the lanes that work is shared by eight
// rows and the block's integer sum is exact before it is scaled: 2.1-2.4 cycles for one token
// and about 2.0 for 5-9 (docs/benchmarks.md, twenty-second pass). The lane GEMMs of prefill
// built this order themselves for every call (about 10 cycles per (row, block) of packing,
// which made them slower than the row kernels below 5-6 tokens); stored once at load, every
// token count takes the lane order, so decode, speculative verification and prefill compute
// the same bits for a token.
//
// Q8_0, group g of rows 8g..8g+7, nb = n / 32 blocks, in the bytes those 8 rows occupy in the
// file (8 * nb * 34):
//   codes:  [b 0..nb)[word w 0..7][row 0..7][4 bytes]  bytes 4w..4w+3 of row's block b
//   scales: [b 0..nb)[row 0..7]                         the blocks' f16 d
#include <cstdint>

#include "tensor/type.h"

namespace tokenscope::tensor {

enum class RowLayout {
    Rows,         // the file's order
    Interleaved8  // groups of 8 rows as above (Q8_0 only)
};

inline constexpr std::int64_t kInterleavedGroupRows = 8;

// Whether a rows x n matrix of `type` can be stored interleaved: Q8_0 with rows a multiple of 8.
bool can_interleave(Type type, std::int64_t rows, std::int64_t n);

// Whether the active SIMD level multiplies `type` faster interleaved: the AVX2 level (its
// tiles above). The AVX-512 kernels keep the file's order (their tiles were tuned on it), and
// the scalar kernels read interleaved rows only by copying each group back. TOKENSCOPE_INTERLEAVE=0
// in the environment says no, to compare the two.
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
