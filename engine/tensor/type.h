#pragma once
// The one table of ggml tensor formats: block size, bytes per block, dequantize and
// quantize of a row. Ids are the ggml/GGUF type ids, so a GGUF tensor's type field maps
// here directly.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tokenscope::tensor {

enum class Type : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    BF16 = 30,
};

// `n` is the number of elements in the row and must be a multiple of the block size.
using DequantizeRowFn = void (*)(const void* blocks, float* out, std::int64_t n);
using QuantizeRowFn = void (*)(const float* in, void* blocks, std::int64_t n);

struct TypeTraits {
    Type type;
    const char* name;            // "Q4_K", as ggml spells it
    std::int64_t block_size;     // elements per block (1 for F32/F16/BF16)
    std::size_t bytes_per_block;
    DequantizeRowFn dequantize_row;
    QuantizeRowFn quantize_row;  // nullptr where we have no quantizer for the format
};

// Every supported format, in id order.
std::span<const TypeTraits> all_types();

// nullptr when `id` is not a supported format.
const TypeTraits* find_traits(std::uint32_t id);

// Throws InvalidArgument naming the id (and listing the supported ones) when unknown.
const TypeTraits& traits_of_id(std::uint32_t id);
const TypeTraits& traits(Type type);

std::optional<Type> parse_type_name(std::string_view name);  // "q4_k" or "Q4_K"
const char* type_name(Type type);

// Bytes of a row of `n` elements; throws InvalidArgument when n is not a whole number of blocks.
std::size_t row_bytes(Type type, std::int64_t n);

void dequantize_row(Type type, const void* blocks, float* out, std::int64_t n);
// Throws InvalidArgument when the format has no quantizer.
void quantize_row(Type type, const float* in, void* blocks, std::int64_t n);

// Importance-weighted quantization (the imatrix): `importance` holds n non-negative floats,
// one per element of the row (the mean squared activation of the weight's input column).
// The rounding error of element j is weighted by importance[j] * sqrt(mean(x^2) + x[j]^2)
// when choosing each block's scale (and offset). Formats without a weighted search (F32, F16,
// BF16, Q8_0) and a null `importance` give exactly quantize_row. Throws like quantize_row.
void quantize_row_weighted(Type type, const float* in, void* blocks, std::int64_t n, const float* importance);
// True where quantize_row_weighted uses the importance (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K).
bool uses_importance(Type type);

}  // namespace tokenscope::tensor
