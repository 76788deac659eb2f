#pragma once
// Shape, element type and byte arithmetic of the paged KV cache. Shared by the bookkeeping
// (KvCacheManager), the CPU storage (KvStorage), a device storage and the GUI, so that every
// one of them computes sizes with the same formula.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokenscope::kv {

// F16 is the default: half the memory of F32 with an error far below what the model notices.
// Q8 stores int8 values plus one float scale per (token, layer, head) row of head_dim values.
enum class ElementType { F32, F16, Q8 };

// "f32", "f16", "q8".
const char* element_type_name(ElementType type);
// Inverse of element_type_name (lower case only); nullopt for anything else.
std::optional<ElementType> parse_element_type(std::string_view text);
// 4, 2 or 1: the values only, without Q8's per-row scale.
int element_bytes(ElementType type);

// num_blocks comes before the defaulted fields so that a positional initializer
// {layers, kv_heads, head_dim, num_blocks} cannot put the block count into block_size.
struct CacheShape {
    int layers = 0;
    int kv_heads = 0;
    int head_dim = 0;
    int num_blocks = 0;
    int block_size = 16;  // tokens per block
    ElementType type = ElementType::F16;

    bool operator==(const CacheShape&) const = default;
};

// Throws InvalidArgument naming the field unless every count is positive, the capacity in
// tokens fits in an int (positions are ints) and the byte size fits in 63 bits.
void validate(const CacheShape& shape);

// Bytes of one row: one token's K (or V) for one layer and one kv head,
// head_dim * element_bytes, plus a 4-byte float scale for Q8.
std::uint64_t row_bytes(const CacheShape& shape);
// Bytes one token occupies in the whole cache: 2 (K and V) * layers * kv_heads * row_bytes.
std::uint64_t bytes_per_token(const CacheShape& shape);
// The formula behind bytes_per_token with this shape's numbers, for the GUI and the CLI, e.g.
// "2 × 18 layers × 1 kv_heads × 256 head_dim × 2 B (f16) = 18432 B per token" or, for Q8,
// "2 × 3 layers × 5 kv_heads × (17 head_dim × 1 B + 4 B scale) (q8) = 630 B per token".
// UTF-8 (the multiplication sign is U+00D7).
std::string bytes_per_token_formula(const CacheShape& shape);
// num_blocks * block_size tokens.
std::int64_t capacity_tokens(const CacheShape& shape);
// Capacity in bytes: bytes_per_token * capacity_tokens.
std::uint64_t capacity_bytes(const CacheShape& shape);

}  // namespace tokenscope::kv
