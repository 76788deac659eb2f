#include "tensor/interleaved_rows.h"

#include <cstring>
#include <string>

#include "tensor/block_layouts.h"
#include "util/error.h"

namespace tokenscope::tensor {

namespace {
constexpr std::size_t kQ8Block = sizeof(BlockQ8_0);  // 2-byte d, 32 codes
constexpr std::size_t kWordBytes = 4;
constexpr std::size_t kWords = 32 / kWordBytes;
constexpr auto kGroup = static_cast<std::size_t>(kInterleavedGroupRows);
// Bytes of one block of one group: the codes of 8 rows.
constexpr std::size_t kGroupBlockCodes = kGroup * 32;

void check(Type type, std::int64_t rows, std::int64_t n) {
    if (!can_interleave(type, rows, n)) {
        throw InvalidArgument(std::string("cannot interleave a ") + std::to_string(rows) + " x " +
                              std::to_string(n) + " " + type_name(type) +
                              " matrix (Q8_0 with a multiple of 8 rows only)");
    }
}
}  // namespace

bool can_interleave(Type type, std::int64_t rows, std::int64_t n) {
    return type == Type::Q8_0 && rows > 0 && rows % kInterleavedGroupRows == 0 && n > 0 &&
           n % 32 == 0;
}

void interleave_rows(Type type, const std::uint8_t* rows_in, std::int64_t rows, std::int64_t n,
                     std::uint8_t* out) {
    check(type, rows, n);
    const auto nb = static_cast<std::size_t>(n / 32);
    const std::size_t group_bytes = kGroup * nb * kQ8Block;
    for (std::size_t g = 0; g < static_cast<std::size_t>(rows) / kGroup; ++g) {
        const std::uint8_t* src = rows_in + g * group_bytes;
        std::uint8_t* codes = out + g * group_bytes;
        std::uint8_t* scales = codes + nb * kGroupBlockCodes;
        for (std::size_t r = 0; r < kGroup; ++r) {
            for (std::size_t b = 0; b < nb; ++b) {
                const std::uint8_t* block = src + (r * nb + b) * kQ8Block;
                std::memcpy(scales + (b * kGroup + r) * 2, block, 2);
                for (std::size_t w = 0; w < kWords; ++w) {
                    std::memcpy(codes + b * kGroupBlockCodes + (w * kGroup + r) * kWordBytes,
                                block + 2 + w * kWordBytes, kWordBytes);
                }
            }
        }
    }
}

void row_from_interleaved(Type type, const std::uint8_t* data, std::int64_t n, std::int64_t r,
                          std::uint8_t* row_out) {
    check(type, kInterleavedGroupRows, n);
    if (r < 0) throw InvalidArgument("row_from_interleaved: negative row " + std::to_string(r));
    const auto nb = static_cast<std::size_t>(n / 32);
    const std::size_t group_bytes = kGroup * nb * kQ8Block;
    const std::uint8_t* codes = data + static_cast<std::size_t>(r) / kGroup * group_bytes;
    const std::uint8_t* scales = codes + nb * kGroupBlockCodes;
    const std::size_t lane = static_cast<std::size_t>(r) % kGroup;
    for (std::size_t b = 0; b < nb; ++b) {
        std::uint8_t* block = row_out + b * kQ8Block;
        std::memcpy(block, scales + (b * kGroup + lane) * 2, 2);
        for (std::size_t w = 0; w < kWords; ++w) {
            std::memcpy(block + 2 + w * kWordBytes,
                        codes + b * kGroupBlockCodes + (w * kGroup + lane) * kWordBytes,
                        kWordBytes);
        }
    }
}

}  // namespace tokenscope::tensor
