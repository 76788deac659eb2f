#include "tensor/interleaved_rows.h"

#include <cstring>
#include <string>

#include "tensor/block_layouts.h"
#include "tensor/type.h"
#include "util/error.h"

namespace tokenscope::tensor {

namespace {
// A group's block holds exactly the bytes of its 16 rows' blocks, so groups rewrite in place.
static_assert(kInterleavedBlock<Type::Q8_0>.bytes == 16 * sizeof(BlockQ8_0));
static_assert(kInterleavedBlock<Type::Q4_0>.bytes == 16 * sizeof(BlockQ4_0));
static_assert(kInterleavedBlock<Type::Q4_1>.bytes == 16 * sizeof(BlockQ4_1));
static_assert(kInterleavedBlock<Type::Q5_0>.bytes == 16 * sizeof(BlockQ5_0));
static_assert(kInterleavedBlock<Type::Q5_1>.bytes == 16 * sizeof(BlockQ5_1));
static_assert(kInterleavedBlock<Type::Q4_K>.bytes == 16 * sizeof(BlockQ4_K));
static_assert(kInterleavedBlock<Type::Q5_K>.bytes == 16 * sizeof(BlockQ5_K));
static_assert(kInterleavedBlock<Type::Q6_K>.bytes == 16 * sizeof(BlockQ6_K));
static_assert(kInterleavedBlock<Type::Q3_K>.bytes == 16 * sizeof(BlockQ3_K));
static_assert(kInterleavedBlock<Type::Q2_K>.bytes == 16 * sizeof(BlockQ2_K));

constexpr auto kGroup = static_cast<std::size_t>(kInterleavedGroupRows);
constexpr std::size_t kWordBytes = 4;

// Where a file block of each format keeps its parts (offsets in the block; kNone: absent).
constexpr std::size_t kNone = ~std::size_t{0};
struct FileBlock {
    std::size_t bytes = 0;  // the block
    std::size_t d_at = 0;
    std::size_t min_at = kNone;
    std::size_t high_at = kNone;  // InterleavedBlock::high_bytes there
    std::size_t sub_at = kNone;   // InterleavedBlock::sub_scale_bytes there
    std::size_t codes_at = 0;
    std::size_t code_bytes = 0;
};

FileBlock file_block(Type type) {
    switch (type) {
        case Type::Q8_0:
            return {
                .bytes = sizeof(BlockQ8_0), .codes_at = offsetof(BlockQ8_0, qs), .code_bytes = 32};
        case Type::Q4_0:
            return {
                .bytes = sizeof(BlockQ4_0), .codes_at = offsetof(BlockQ4_0, qs), .code_bytes = 16};
        case Type::Q4_1:
            return {.bytes = sizeof(BlockQ4_1),
                    .min_at = offsetof(BlockQ4_1, m),
                    .codes_at = offsetof(BlockQ4_1, qs),
                    .code_bytes = 16};
        case Type::Q5_0:
            return {.bytes = sizeof(BlockQ5_0),
                    .high_at = offsetof(BlockQ5_0, qh),
                    .codes_at = offsetof(BlockQ5_0, qs),
                    .code_bytes = 16};
        case Type::Q5_1:
            return {.bytes = sizeof(BlockQ5_1),
                    .min_at = offsetof(BlockQ5_1, m),
                    .high_at = offsetof(BlockQ5_1, qh),
                    .codes_at = offsetof(BlockQ5_1, qs),
                    .code_bytes = 16};
        case Type::Q4_K:
            return {.bytes = sizeof(BlockQ4_K),
                    .d_at = offsetof(BlockQ4_K, d),
                    .min_at = offsetof(BlockQ4_K, dmin),
                    .sub_at = offsetof(BlockQ4_K, scales),
                    .codes_at = offsetof(BlockQ4_K, qs),
                    .code_bytes = 128};
        case Type::Q5_K:
            return {.bytes = sizeof(BlockQ5_K),
                    .d_at = offsetof(BlockQ5_K, d),
                    .min_at = offsetof(BlockQ5_K, dmin),
                    .high_at = offsetof(BlockQ5_K, qh),
                    .sub_at = offsetof(BlockQ5_K, scales),
                    .codes_at = offsetof(BlockQ5_K, qs),
                    .code_bytes = 128};
        case Type::Q3_K:
            return {.bytes = sizeof(BlockQ3_K),
                    .d_at = offsetof(BlockQ3_K, d),
                    .high_at = offsetof(BlockQ3_K, hmask),
                    .sub_at = offsetof(BlockQ3_K, scales),
                    .codes_at = offsetof(BlockQ3_K, qs),
                    .code_bytes = 64};
        case Type::Q2_K:
            return {.bytes = sizeof(BlockQ2_K),
                    .d_at = offsetof(BlockQ2_K, d),
                    .min_at = offsetof(BlockQ2_K, dmin),
                    .sub_at = offsetof(BlockQ2_K, scales),
                    .codes_at = offsetof(BlockQ2_K, qs),
                    .code_bytes = 64};
        default:  // Q6_K
            return {.bytes = sizeof(BlockQ6_K),
                    .d_at = offsetof(BlockQ6_K, d),
                    .high_at = offsetof(BlockQ6_K, qh),
                    .sub_at = offsetof(BlockQ6_K, scales),
                    .codes_at = offsetof(BlockQ6_K, ql),
                    .code_bytes = 128};
    }
}

void check(Type type, std::int64_t rows, std::int64_t n) {
    if (!can_interleave(type, rows, n)) {
        throw InvalidArgument(
            std::string("cannot interleave a ") + std::to_string(rows) + " x " + std::to_string(n) +
            " " + type_name(type) +
            " matrix (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or Q2_K-Q6_K with a multiple of 16 rows only)");
    }
}

// Byte offsets, inside a group, of row `lane`'s parts of block b: its codes, high bits and
// sub-block scales word by word (word w at codes(b, w, lane), ...), its d and its min.
struct GroupMap {
    FileBlock f;
    const InterleavedBlock& g;
    std::size_t nb;
    std::size_t block(std::size_t b) const { return b * g.bytes; }
    // Word w of row `lane` in a part stored [half][word][row 0..7][4 bytes], of `row_bytes`
    // bytes per row, starting at `part`.
    std::size_t word(std::size_t b, std::size_t part, std::size_t row_bytes, std::size_t w,
                     std::size_t lane) const {
        return block(b) + part + lane / 8 * (8 * row_bytes) + (w * 8 + lane % 8) * kWordBytes;
    }
    std::size_t d(std::size_t b, std::size_t lane) const { return block(b) + g.scales + lane * 2; }
    std::size_t min(std::size_t b, std::size_t lane) const { return block(b) + g.mins + lane * 2; }
};

// Calls visit(offset in the row, offset in the group, bytes) for every part of row `lane` of a
// group: each block's d, min, high bits, sub-block scales and codes, word by word.
template <class Visit>
void for_each_part(const GroupMap& m, std::size_t lane, Visit&& visit) {
    const auto words = [&](std::size_t b, std::size_t file_at, std::size_t part,
                           std::size_t row_bytes) {
        for (std::size_t w = 0; w < row_bytes / kWordBytes; ++w) {
            visit(b * m.f.bytes + file_at + w * kWordBytes, m.word(b, part, row_bytes, w, lane),
                  kWordBytes);
        }
    };
    for (std::size_t b = 0; b < m.nb; ++b) {
        visit(b * m.f.bytes + m.f.d_at, m.d(b, lane), 2);
        if (m.g.has_mins()) visit(b * m.f.bytes + m.f.min_at, m.min(b, lane), 2);
        if (m.g.has_high_bits()) words(b, m.f.high_at, m.g.high_bits, m.g.high_bytes);
        if (m.g.has_sub_scales()) words(b, m.f.sub_at, m.g.sub_scales, m.g.sub_scale_bytes);
        words(b, m.f.codes_at, 0, m.f.code_bytes);
    }
}
}  // namespace

namespace {
// kInterleavedBlock of `type`, or null for a type without that layout: the one list of them.
const InterleavedBlock* find_interleaved_block(Type type) {
    switch (type) {
        case Type::Q8_0:
            return &kInterleavedBlock<Type::Q8_0>;
        case Type::Q4_0:
            return &kInterleavedBlock<Type::Q4_0>;
        case Type::Q4_1:
            return &kInterleavedBlock<Type::Q4_1>;
        case Type::Q5_0:
            return &kInterleavedBlock<Type::Q5_0>;
        case Type::Q5_1:
            return &kInterleavedBlock<Type::Q5_1>;
        case Type::Q4_K:
            return &kInterleavedBlock<Type::Q4_K>;
        case Type::Q5_K:
            return &kInterleavedBlock<Type::Q5_K>;
        case Type::Q6_K:
            return &kInterleavedBlock<Type::Q6_K>;
        case Type::Q3_K:
            return &kInterleavedBlock<Type::Q3_K>;
        case Type::Q2_K:
            return &kInterleavedBlock<Type::Q2_K>;
        default:
            return nullptr;
    }
}
}  // namespace

bool has_interleaved_layout(Type type) {
    return find_interleaved_block(type) != nullptr;
}

const InterleavedBlock& interleaved_block(Type type) {
    const InterleavedBlock* block = find_interleaved_block(type);
    if (!block) throw InvalidArgument(std::string(type_name(type)) + " has no interleaved layout");
    return *block;
}

bool can_interleave(Type type, std::int64_t rows, std::int64_t n) {
    return has_interleaved_layout(type) && rows > 0 && rows % kInterleavedGroupRows == 0 && n > 0 &&
           n % static_cast<std::int64_t>(interleaved_block(type).elements) == 0;
}

void interleave_rows(Type type, const std::uint8_t* rows_in, std::int64_t rows, std::int64_t n,
                     std::uint8_t* out) {
    check(type, rows, n);
    const GroupMap m{file_block(type), interleaved_block(type),
                     static_cast<std::size_t>(n) / interleaved_block(type).elements};
    const std::size_t row_bytes = m.nb * m.f.bytes;
    for (std::size_t g = 0; g < static_cast<std::size_t>(rows) / kGroup; ++g) {
        std::uint8_t* group = out + g * kGroup * row_bytes;
        for (std::size_t lane = 0; lane < kGroup; ++lane) {
            const std::uint8_t* row = rows_in + (g * kGroup + lane) * row_bytes;
            for_each_part(m, lane, [&](std::size_t in_row, std::size_t in_group, std::size_t len) {
                std::memcpy(group + in_group, row + in_row, len);
            });
        }
    }
}

void row_from_interleaved(Type type, const std::uint8_t* data, std::int64_t n, std::int64_t r,
                          std::uint8_t* row_out) {
    check(type, kInterleavedGroupRows, n);
    if (r < 0) throw InvalidArgument("row_from_interleaved: negative row " + std::to_string(r));
    const GroupMap m{file_block(type), interleaved_block(type),
                     static_cast<std::size_t>(n) / interleaved_block(type).elements};
    const std::size_t row_bytes = m.nb * m.f.bytes;
    const std::uint8_t* group = data + static_cast<std::size_t>(r) / kGroup * kGroup * row_bytes;
    for_each_part(m, static_cast<std::size_t>(r) % kGroup,
                  [&](std::size_t in_row, std::size_t in_group, std::size_t len) {
                      std::memcpy(row_out + in_row, group + in_group, len);
                  });
}

}  // namespace tokenscope::tensor
