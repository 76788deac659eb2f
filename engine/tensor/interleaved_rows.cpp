#include "tensor/interleaved_rows.h"

#include <cstring>
#include <string>

#include "tensor/block_layouts.h"
#include "tensor/type.h"
#include "util/error.h"

namespace tokenscope::tensor {

namespace {
constexpr auto kGroup = static_cast<std::size_t>(kInterleavedGroupRows);
constexpr std::size_t kWordBytes = 4;

// Where a block of each format keeps its parts, and how many code bytes a row's block has.
struct Parts {
    std::size_t block_bytes;  // in the file
    std::size_t codes_at;     // offset of the codes in a block
    std::size_t code_bytes;   // 32 (Q8_0) or 16 (nibbles)
    bool has_min;             // Q4_1, Q5_1: a second f16 after d
    bool has_high_bits;       // Q5_0, Q5_1: 4 bytes of fifth bits before the codes
};

Parts parts_of(Type type) {
    switch (type) {
        case Type::Q8_0:
            return {sizeof(BlockQ8_0), offsetof(BlockQ8_0, qs), 32, false, false};
        case Type::Q4_0:
            return {sizeof(BlockQ4_0), offsetof(BlockQ4_0, qs), 16, false, false};
        case Type::Q4_1:
            return {sizeof(BlockQ4_1), offsetof(BlockQ4_1, qs), 16, true, false};
        case Type::Q5_0:
            return {sizeof(BlockQ5_0), offsetof(BlockQ5_0, qs), 16, false, true};
        default:  // Q5_1
            return {sizeof(BlockQ5_1), offsetof(BlockQ5_1, qs), 16, true, true};
    }
}

void check(Type type, std::int64_t rows, std::int64_t n) {
    if (!can_interleave(type, rows, n)) {
        throw InvalidArgument(
            std::string("cannot interleave a ") + std::to_string(rows) + " x " + std::to_string(n) +
            " " + type_name(type) +
            " matrix (Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 with a multiple of 16 rows only)");
    }
}

// Byte offsets, inside a group, of row `lane`'s parts of block b: its codes word by word (word w
// at codes(b, w, lane)), its fifth bits, its d and its min.
struct GroupMap {
    Parts p;
    std::size_t nb;
    std::size_t block(std::size_t b) const { return b * kGroup * p.block_bytes; }
    std::size_t codes(std::size_t b, std::size_t w, std::size_t lane) const {
        return block(b) + lane / 8 * 8 * p.code_bytes + (w * 8 + lane % 8) * kWordBytes;
    }
    std::size_t high_bits(std::size_t b, std::size_t lane) const {
        return block(b) + kGroup * p.code_bytes + lane * 4;
    }
    std::size_t d(std::size_t b, std::size_t lane) const {
        return block(b) + kGroup * (p.code_bytes + (p.has_high_bits ? 4 : 0)) + lane * 2;
    }
    std::size_t min(std::size_t b, std::size_t lane) const { return d(b, lane) + kGroup * 2; }
};

// Calls visit(offset in the row, offset in the group, bytes) for every part of row `lane` of a
// group: each block's d, min, fifth bits and code words.
template <class Visit>
void for_each_part(const GroupMap& m, std::size_t lane, Visit&& visit) {
    for (std::size_t b = 0; b < m.nb; ++b) {
        const std::size_t block = b * m.p.block_bytes;
        visit(block, m.d(b, lane), 2);
        if (m.p.has_min) visit(block + 2, m.min(b, lane), 2);
        if (m.p.has_high_bits) visit(block + m.p.codes_at - 4, m.high_bits(b, lane), 4);
        for (std::size_t w = 0; w < m.p.code_bytes / kWordBytes; ++w)
            visit(block + m.p.codes_at + w * kWordBytes, m.codes(b, w, lane), kWordBytes);
    }
}
}  // namespace

bool can_interleave(Type type, std::int64_t rows, std::int64_t n) {
    return (type == Type::Q8_0 || type == Type::Q4_0 || type == Type::Q4_1 || type == Type::Q5_0 ||
            type == Type::Q5_1) &&
           rows > 0 && rows % kInterleavedGroupRows == 0 && n > 0 && n % 32 == 0;
}

void interleave_rows(Type type, const std::uint8_t* rows_in, std::int64_t rows, std::int64_t n,
                     std::uint8_t* out) {
    check(type, rows, n);
    const GroupMap m{parts_of(type), static_cast<std::size_t>(n / 32)};
    const std::size_t row_bytes = m.nb * m.p.block_bytes;
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
    const GroupMap m{parts_of(type), static_cast<std::size_t>(n / 32)};
    const std::size_t row_bytes = m.nb * m.p.block_bytes;
    const std::uint8_t* group = data + static_cast<std::size_t>(r) / kGroup * kGroup * row_bytes;
    for_each_part(m, static_cast<std::size_t>(r) % kGroup,
                  [&](std::size_t in_row, std::size_t in_group, std::size_t len) {
                      std::memcpy(row_out + in_row, group + in_group, len);
                  });
}

}  // namespace tokenscope::tensor
