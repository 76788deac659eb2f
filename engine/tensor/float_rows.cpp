// F32 / F16 / BF16 rows. Elements are read and written byte-wise (little-endian, as GGUF stores
// them) because a row inside an mmapped file need not be aligned for float or uint16_t access.
#include <cstring>

#include "tensor/f16.h"
#include "tensor/row_kernels.h"

namespace tokenscope::tensor::detail {

namespace {

std::uint16_t load_u16(const std::uint8_t* p) {
    return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

void store_u16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v & 0xFFu);
    p[1] = static_cast<std::uint8_t>(v >> 8);
}

}  // namespace

void dequantize_row_f32(const void* blocks, float* out, std::int64_t n) {
    std::memcpy(out, blocks, static_cast<std::size_t>(n) * sizeof(float));
}

void dequantize_row_f16(const void* blocks, float* out, std::int64_t n) {
    const auto* bytes = static_cast<const std::uint8_t*>(blocks);
    for (std::int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16(bytes + 2 * i));
}

void dequantize_row_bf16(const void* blocks, float* out, std::int64_t n) {
    const auto* bytes = static_cast<const std::uint8_t*>(blocks);
    for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16(bytes + 2 * i));
}

void quantize_row_f32(const float* in, void* blocks, std::int64_t n) {
    std::memcpy(blocks, in, static_cast<std::size_t>(n) * sizeof(float));
}

void quantize_row_f16(const float* in, void* blocks, std::int64_t n) {
    auto* bytes = static_cast<std::uint8_t*>(blocks);
    for (std::int64_t i = 0; i < n; ++i) store_u16(bytes + 2 * i, f32_to_f16(in[i]));
}

void quantize_row_bf16(const float* in, void* blocks, std::int64_t n) {
    auto* bytes = static_cast<std::uint8_t*>(blocks);
    for (std::int64_t i = 0; i < n; ++i) store_u16(bytes + 2 * i, f32_to_bf16(in[i]));
}

}  // namespace tokenscope::tensor::detail
