#include "kv/kv_types.h"

#include <limits>

#include <fmt/format.h>

#include "util/error.h"

namespace tokenscope::kv {

const char* element_type_name(ElementType type) {
    switch (type) {
        case ElementType::F32:
            return "f32";
        case ElementType::F16:
            return "f16";
        case ElementType::Q8:
            return "q8";
    }
    return "unknown";
}

std::optional<ElementType> parse_element_type(std::string_view text) {
    for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::Q8}) {
        if (text == element_type_name(type)) return type;
    }
    return std::nullopt;
}

int element_bytes(ElementType type) {
    switch (type) {
        case ElementType::F32:
            return 4;
        case ElementType::F16:
            return 2;
        case ElementType::Q8:
            return 1;
    }
    throw InvalidArgument(fmt::format("kv: unknown element type {}", static_cast<int>(type)));
}

void validate(const CacheShape& shape) {
    const auto positive = [](const char* name, int value) {
        if (value <= 0) {
            throw InvalidArgument(
                fmt::format("kv: cache shape {} must be positive, got {}", name, value));
        }
    };
    positive("layers", shape.layers);
    positive("kv_heads", shape.kv_heads);
    positive("head_dim", shape.head_dim);
    positive("num_blocks", shape.num_blocks);
    positive("block_size", shape.block_size);
    element_bytes(shape.type);  // throws for a value outside the enum

    // Token positions and counts are ints everywhere (block tables, slot arithmetic).
    if (capacity_tokens(shape) > std::numeric_limits<int>::max()) {
        throw InvalidArgument(fmt::format("kv: {} blocks of {} tokens exceed {} tokens",
                                          shape.num_blocks, shape.block_size,
                                          std::numeric_limits<int>::max()));
    }
    // Every factor is below 2^31 but their product need not be: multiply step by step,
    // checking each step, so that a huge shape is reported instead of wrapping around.
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t total = 2;
    for (std::uint64_t factor :
         {static_cast<std::uint64_t>(shape.layers), static_cast<std::uint64_t>(shape.kv_heads),
          row_bytes(shape), static_cast<std::uint64_t>(shape.num_blocks),
          static_cast<std::uint64_t>(shape.block_size)}) {
        if (total > kMax / factor) {
            throw InvalidArgument(fmt::format(
                "kv: cache of {} layers x {} kv heads x {} head_dim x {} blocks x {} tokens "
                "overflows 64 bits",
                shape.layers, shape.kv_heads, shape.head_dim, shape.num_blocks, shape.block_size));
        }
        total *= factor;
    }
}

std::uint64_t row_bytes(const CacheShape& shape) {
    const auto values = static_cast<std::uint64_t>(shape.head_dim) *
                        static_cast<std::uint64_t>(element_bytes(shape.type));
    return shape.type == ElementType::Q8 ? values + sizeof(float) : values;
}

std::uint64_t bytes_per_token(const CacheShape& shape) {
    return 2u * static_cast<std::uint64_t>(shape.layers) *
           static_cast<std::uint64_t>(shape.kv_heads) * row_bytes(shape);
}

std::string bytes_per_token_formula(const CacheShape& shape) {
    const int eb = element_bytes(shape.type);
    const std::string row =
        shape.type == ElementType::Q8
            ? fmt::format("({} head_dim \u00d7 {} B + 4 B scale)", shape.head_dim, eb)
            : fmt::format("{} head_dim \u00d7 {} B", shape.head_dim, eb);
    return fmt::format("2 \u00d7 {} layers \u00d7 {} kv_heads \u00d7 {} ({}) = {} B per token",
                       shape.layers, shape.kv_heads, row, element_type_name(shape.type),
                       bytes_per_token(shape));
}

std::int64_t capacity_tokens(const CacheShape& shape) {
    return static_cast<std::int64_t>(shape.num_blocks) * shape.block_size;
}

std::uint64_t capacity_bytes(const CacheShape& shape) {
    return bytes_per_token(shape) * static_cast<std::uint64_t>(capacity_tokens(shape));
}

}  // namespace tokenscope::kv
