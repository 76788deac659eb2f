// The one table of supported ggml formats and the checked entry points around it.
#include <array>
#include <cctype>
#include <string>

#include "tensor/block_layouts.h"
#include "tensor/row_kernels.h"
#include "tensor/type.h"
#include "util/error.h"

namespace tokenscope::tensor {

namespace {

using namespace detail;

// In id order, so that all_types() lists them the way ggml numbers them.
constexpr std::array<TypeTraits, 13> kTypes{{
    {Type::F32, "F32", 1, sizeof(float), dequantize_row_f32, quantize_row_f32},
    {Type::F16, "F16", 1, 2, dequantize_row_f16, quantize_row_f16},
    {Type::Q4_0, "Q4_0", QK4_0, sizeof(BlockQ4_0), dequantize_row_q4_0, quantize_row_q4_0},
    {Type::Q4_1, "Q4_1", QK4_1, sizeof(BlockQ4_1), dequantize_row_q4_1, quantize_row_q4_1},
    {Type::Q5_0, "Q5_0", QK5_0, sizeof(BlockQ5_0), dequantize_row_q5_0, quantize_row_q5_0},
    {Type::Q5_1, "Q5_1", QK5_1, sizeof(BlockQ5_1), dequantize_row_q5_1, quantize_row_q5_1},
    {Type::Q8_0, "Q8_0", QK8_0, sizeof(BlockQ8_0), dequantize_row_q8_0, quantize_row_q8_0},
    {Type::Q2_K, "Q2_K", QK_K, sizeof(BlockQ2_K), dequantize_row_q2_k, quantize_row_q2_k},
    {Type::Q3_K, "Q3_K", QK_K, sizeof(BlockQ3_K), dequantize_row_q3_k, quantize_row_q3_k},
    {Type::Q4_K, "Q4_K", QK_K, sizeof(BlockQ4_K), dequantize_row_q4_k, quantize_row_q4_k},
    {Type::Q5_K, "Q5_K", QK_K, sizeof(BlockQ5_K), dequantize_row_q5_k, quantize_row_q5_k},
    {Type::Q6_K, "Q6_K", QK_K, sizeof(BlockQ6_K), dequantize_row_q6_k, quantize_row_q6_k},
    {Type::BF16, "BF16", 1, 2, dequantize_row_bf16, quantize_row_bf16},
}};

std::string supported_names() {
    std::string names;
    for (const TypeTraits& t : kTypes) {
        if (!names.empty()) names += ", ";
        names += t.name;
        names += '=';
        names += std::to_string(static_cast<std::uint32_t>(t.type));
    }
    return names;
}

const TypeTraits& checked_row(Type type, std::int64_t n) {
    const TypeTraits& t = traits(type);
    if (n < 0) {
        throw InvalidArgument("negative row length " + std::to_string(n) + " for " + t.name);
    }
    if (n % t.block_size != 0) {
        throw InvalidArgument("row of " + std::to_string(n) + " elements is not a multiple of " +
                              t.name + "'s block size " + std::to_string(t.block_size));
    }
    return t;
}

}  // namespace

std::span<const TypeTraits> all_types() {
    return kTypes;
}

const TypeTraits* find_traits(std::uint32_t id) {
    for (const TypeTraits& t : kTypes) {
        if (static_cast<std::uint32_t>(t.type) == id) return &t;
    }
    return nullptr;
}

const TypeTraits& traits_of_id(std::uint32_t id) {
    if (const TypeTraits* t = find_traits(id)) return *t;
    throw InvalidArgument("unknown tensor type id " + std::to_string(id) +
                          " (supported: " + supported_names() + ")");
}

const TypeTraits& traits(Type type) {
    return traits_of_id(static_cast<std::uint32_t>(type));
}

std::optional<Type> parse_type_name(std::string_view name) {
    for (const TypeTraits& t : kTypes) {
        const std::string_view candidate = t.name;
        if (candidate.size() != name.size()) continue;
        bool equal = true;
        for (std::size_t i = 0; i < name.size() && equal; ++i) {
            equal = std::toupper(static_cast<unsigned char>(name[i])) ==
                    static_cast<unsigned char>(candidate[i]);
        }
        if (equal) return t.type;
    }
    return std::nullopt;
}

const char* type_name(Type type) {
    return traits(type).name;
}

std::size_t row_bytes(Type type, std::int64_t n) {
    const TypeTraits& t = checked_row(type, n);
    return static_cast<std::size_t>(n / t.block_size) * t.bytes_per_block;
}

void dequantize_row(Type type, const void* blocks, float* out, std::int64_t n) {
    const TypeTraits& t = checked_row(type, n);
    if (n == 0) return;  // callers may pass null pointers for an empty row
    t.dequantize_row(blocks, out, n);
}

void quantize_row(Type type, const float* in, void* blocks, std::int64_t n) {
    const TypeTraits& t = checked_row(type, n);
    if (t.quantize_row == nullptr) {
        throw InvalidArgument(std::string("no quantizer for tensor type ") + t.name);
    }
    if (n == 0) return;
    t.quantize_row(in, blocks, n);
}

}  // namespace tokenscope::tensor
