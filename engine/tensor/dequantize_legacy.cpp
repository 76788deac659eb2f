// Dequantization of the 32-element "legacy" formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0.
// Arithmetic is done in the same order as ggml (scale * q, then + min) so results match
// llama.cpp's CPU path bit for bit.
#include "tensor/block_layouts.h"
#include "tensor/row_kernels.h"

namespace tokenscope::tensor::detail {

namespace {

// Bit 4 of element e of a Q5 block: bit e of the little-endian word qh.
std::uint32_t load_qh(const std::uint8_t (&qh)[4]) {
    return static_cast<std::uint32_t>(qh[0]) | (static_cast<std::uint32_t>(qh[1]) << 8) |
           (static_cast<std::uint32_t>(qh[2]) << 16) | (static_cast<std::uint32_t>(qh[3]) << 24);
}

}  // namespace

void dequantize_row_q4_0(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ4_0*>(blocks);
    for (std::int64_t b = 0; b < n / QK4_0; ++b, out += QK4_0) {
        const float d = load_f16(x[b].d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            out[j] = static_cast<float>((x[b].qs[j] & 0xF) - 8) * d;
            out[j + QK4_0 / 2] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_row_q4_1(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ4_1*>(blocks);
    for (std::int64_t b = 0; b < n / QK4_1; ++b, out += QK4_1) {
        const float d = load_f16(x[b].d);
        const float m = load_f16(x[b].m);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            out[j] = static_cast<float>(x[b].qs[j] & 0xF) * d + m;
            out[j + QK4_1 / 2] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
        }
    }
}

void dequantize_row_q5_0(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ5_0*>(blocks);
    for (std::int64_t b = 0; b < n / QK5_0; ++b, out += QK5_0) {
        const float d = load_f16(x[b].d);
        const std::uint32_t qh = load_qh(x[b].qh);
        for (int j = 0; j < QK5_0 / 2; ++j) {
            const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
            const int hi1 = static_cast<int>((qh >> (j + QK5_0 / 2)) & 1u) << 4;
            out[j] = static_cast<float>(((x[b].qs[j] & 0xF) | hi0) - 16) * d;
            out[j + QK5_0 / 2] = static_cast<float>(((x[b].qs[j] >> 4) | hi1) - 16) * d;
        }
    }
}

void dequantize_row_q5_1(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ5_1*>(blocks);
    for (std::int64_t b = 0; b < n / QK5_1; ++b, out += QK5_1) {
        const float d = load_f16(x[b].d);
        const float m = load_f16(x[b].m);
        const std::uint32_t qh = load_qh(x[b].qh);
        for (int j = 0; j < QK5_1 / 2; ++j) {
            const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
            const int hi1 = static_cast<int>((qh >> (j + QK5_1 / 2)) & 1u) << 4;
            out[j] = static_cast<float>((x[b].qs[j] & 0xF) | hi0) * d + m;
            out[j + QK5_1 / 2] = static_cast<float>((x[b].qs[j] >> 4) | hi1) * d + m;
        }
    }
}

void dequantize_row_q8_0(const void* blocks, float* out, std::int64_t n) {
    const auto* x = static_cast<const BlockQ8_0*>(blocks);
    for (std::int64_t b = 0; b < n / QK8_0; ++b, out += QK8_0) {
        const float d = load_f16(x[b].d);
        for (int j = 0; j < QK8_0; ++j) out[j] = static_cast<float>(x[b].qs[j]) * d;
    }
}

}  // namespace tokenscope::tensor::detail
