#pragma once
// Device dequantizers for every ggml format of engine/tensor/type.h. Bit-exact with the CPU
// code in engine/tensor/dequantize_legacy.cpp and dequantize_kquants.cpp: the same formulas in
// the same order, with __fmul_rn/__fadd_rn/__fsub_rn so that nvcc never contracts a
// multiply-add into an FMA (the CPU build does not contract either: -std=c++20, no -ffast-math).
// The kernels are compiled without --use_fast_math; keep it that way for these files.
//
// Only for .cu files (uses CUDA intrinsics). The kernels may be compiled as C++17, where
// engine/tensor/type.h needs C++20 (<span>), so tensor::Type is declared opaquely and the enum
// values are repeated as constants in ops/type_ids.h; kernels/selftest/ops_selftest.cpp
// static_asserts that they agree with type.h.
//
// Names (stable, shared with kernels/matmul/):
//   dq::kF32 ... dq::kBF16               type ids (= static_cast<std::uint32_t>(tensor::Type))
//   dq::block_size(type)                 elements per block (1 for F32/F16/BF16), 0 if unknown
//   dq::block_bytes(type)                bytes per block, 0 if unknown
//   dq::row_bytes(type, n)               bytes of a row of n elements (n a multiple of block_size)
//   dq::f16_bits_to_float(bits), dq::bf16_bits_to_float(bits), dq::load_f16_le(ptr)
//   dq::dequant_q4_0(block, e) ... dq::dequant_q6_k(block, e)
//                                        element e (0 <= e < block size) of one block
//   dq::dequant_in_block(block, type, e)  element e of one block of any type
//   dq::dequant_element(row, type, index) element `index` of a row that starts at `row`
//   dq::dequant_block(block, type, out)  a whole block (block_size floats) into out
#include <cstdint>

#include <cuda_fp16.h>

#include "ops/type_ids.h"
#include "tensor/block_layouts.h"

namespace tokenscope::tensor {
enum class Type : std::uint32_t;
}

namespace tokenscope::cuda::ops::dq {

__host__ __device__ inline std::int64_t block_size(tensor::Type type) {
    switch (static_cast<std::uint32_t>(type)) {
        case kF32:
        case kF16:
        case kBF16:
            return 1;
        case kQ4_0:
        case kQ4_1:
        case kQ5_0:
        case kQ5_1:
        case kQ8_0:
            return 32;
        case kQ2_K:
        case kQ3_K:
        case kQ4_K:
        case kQ5_K:
        case kQ6_K:
            return tensor::QK_K;
        default:
            return 0;
    }
}

__host__ __device__ inline std::int64_t block_bytes(tensor::Type type) {
    switch (static_cast<std::uint32_t>(type)) {
        case kF32: return 4;
        case kF16: return 2;
        case kBF16: return 2;
        case kQ4_0: return sizeof(tensor::BlockQ4_0);
        case kQ4_1: return sizeof(tensor::BlockQ4_1);
        case kQ5_0: return sizeof(tensor::BlockQ5_0);
        case kQ5_1: return sizeof(tensor::BlockQ5_1);
        case kQ8_0: return sizeof(tensor::BlockQ8_0);
        case kQ2_K: return sizeof(tensor::BlockQ2_K);
        case kQ3_K: return sizeof(tensor::BlockQ3_K);
        case kQ4_K: return sizeof(tensor::BlockQ4_K);
        case kQ5_K: return sizeof(tensor::BlockQ5_K);
        case kQ6_K: return sizeof(tensor::BlockQ6_K);
        default: return 0;
    }
}

// n must be a multiple of block_size(type) (callers check on the host).
__host__ __device__ inline std::int64_t row_bytes(tensor::Type type, std::int64_t n) {
    const std::int64_t bs = block_size(type);
    return bs == 0 ? 0 : n / bs * block_bytes(type);
}

// Exact conversions (every half / bfloat16 is a float).
__device__ inline float f16_bits_to_float(std::uint16_t bits) {
    return __half2float(__ushort_as_half(bits));
}
__device__ inline float bf16_bits_to_float(std::uint16_t bits) {
    return __uint_as_float(static_cast<unsigned>(bits) << 16);
}
// A little-endian half at any address (blocks have alignment 1).
__device__ inline float load_f16_le(const std::uint8_t* p) {
    return f16_bits_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

// ---- legacy 32-element blocks -------------------------------------------------------------

__device__ inline float dequant_q4_0(const tensor::BlockQ4_0* b, int e) {
    const int q = e < 16 ? (b->qs[e] & 0xF) : (b->qs[e - 16] >> 4);
    return __fmul_rn(static_cast<float>(q - 8), load_f16_le(b->d));
}

__device__ inline float dequant_q4_1(const tensor::BlockQ4_1* b, int e) {
    const int q = e < 16 ? (b->qs[e] & 0xF) : (b->qs[e - 16] >> 4);
    return __fadd_rn(__fmul_rn(static_cast<float>(q), load_f16_le(b->d)), load_f16_le(b->m));
}

__device__ inline std::uint32_t load_qh_le(const std::uint8_t* qh) {
    return static_cast<std::uint32_t>(qh[0]) | (static_cast<std::uint32_t>(qh[1]) << 8) |
           (static_cast<std::uint32_t>(qh[2]) << 16) | (static_cast<std::uint32_t>(qh[3]) << 24);
}

__device__ inline float dequant_q5_0(const tensor::BlockQ5_0* b, int e) {
    const int low = e < 16 ? (b->qs[e] & 0xF) : (b->qs[e - 16] >> 4);
    const int hi = static_cast<int>((load_qh_le(b->qh) >> e) & 1u) << 4;
    return __fmul_rn(static_cast<float>((low | hi) - 16), load_f16_le(b->d));
}

__device__ inline float dequant_q5_1(const tensor::BlockQ5_1* b, int e) {
    const int low = e < 16 ? (b->qs[e] & 0xF) : (b->qs[e - 16] >> 4);
    const int hi = static_cast<int>((load_qh_le(b->qh) >> e) & 1u) << 4;
    return __fadd_rn(__fmul_rn(static_cast<float>(low | hi), load_f16_le(b->d)),
                     load_f16_le(b->m));
}

__device__ inline float dequant_q8_0(const tensor::BlockQ8_0* b, int e) {
    return __fmul_rn(static_cast<float>(b->qs[e]), load_f16_le(b->d));
}

// ---- K-quants, 256-element super-blocks ---------------------------------------------------

__device__ inline float dequant_q2_k(const tensor::BlockQ2_K* b, int e) {
    const int s = e / 16;
    const float dl = __fmul_rn(load_f16_le(b->d), static_cast<float>(b->scales[s] & 0xF));
    const float ml = __fmul_rn(load_f16_le(b->dmin), static_cast<float>(b->scales[s] >> 4));
    const int q = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    return __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
}

// Signed 6-bit scale of sub-block s (unpack_scale_q3_k in kquant_scales.h).
__device__ inline int q3_k_scale(int s, const std::uint8_t* scales) {
    const int low = s < 8 ? (scales[s] & 0xF) : (scales[s - 8] >> 4);
    const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (low | (high << 4)) - 32;
}

__device__ inline float dequant_q3_k(const tensor::BlockQ3_K* b, int e) {
    const int s = e / 16;
    const float dl = __fmul_rn(load_f16_le(b->d), static_cast<float>(q3_k_scale(s, b->scales)));
    const int l = e % 32;
    const int low = (b->qs[32 * (e / 128) + l] >> (2 * ((e % 128) / 32))) & 3;
    const unsigned mask = 1u << (e / 32);
    const int value = low - ((b->hmask[l] & mask) != 0 ? 0 : 4);
    return __fmul_rn(dl, static_cast<float>(value));
}

// 6-bit scale and min of sub-block j of Q4_K / Q5_K (unpack_scale_min_k4 in kquant_scales.h).
__device__ inline void k4_scale_min(int j, const std::uint8_t* scales, int* sc, int* m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
        *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
    }
}

__device__ inline float dequant_q4_k(const tensor::BlockQ4_K* b, int e) {
    const int s = e / 32;
    int sc = 0, m = 0;
    k4_scale_min(s, b->scales, &sc, &m);
    const float d1 = __fmul_rn(load_f16_le(b->d), static_cast<float>(sc));
    const float m1 = __fmul_rn(load_f16_le(b->dmin), static_cast<float>(m));
    const std::uint8_t byte = b->qs[32 * (e / 64) + e % 32];
    const int q = (s % 2 == 0) ? (byte & 0xF) : (byte >> 4);
    return __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
}

__device__ inline float dequant_q5_k(const tensor::BlockQ5_K* b, int e) {
    const int s = e / 32;
    int sc = 0, m = 0;
    k4_scale_min(s, b->scales, &sc, &m);
    const float d1 = __fmul_rn(load_f16_le(b->d), static_cast<float>(sc));
    const float m1 = __fmul_rn(load_f16_le(b->dmin), static_cast<float>(m));
    const std::uint8_t byte = b->qs[32 * (e / 64) + e % 32];
    const int low = (s % 2 == 0) ? (byte & 0xF) : (byte >> 4);
    const int q = low + ((b->qh[e % 32] & (1u << s)) != 0 ? 16 : 0);
    return __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
}

__device__ inline float dequant_q6_k(const tensor::BlockQ6_K* b, int e) {
    // e = 128n + 32k + l
    const int n = e / 128;
    const int k = (e % 128) / 32;
    const int l = e % 32;
    const std::uint8_t lbyte = b->ql[64 * n + 32 * (k % 2) + l];
    const int low = k < 2 ? (lbyte & 0xF) : (lbyte >> 4);
    const int high = (b->qh[32 * n + l] >> (2 * k)) & 3;
    const int q = (low | (high << 4)) - 32;
    // Sub-block of 16: scales[8n + 2k + l/16] (CPU: sc[is + 2k] with is = l/16 after sc += 8n).
    const int s = 8 * n + 2 * k + l / 16;
    return __fmul_rn(__fmul_rn(load_f16_le(b->d), static_cast<float>(b->scales[s])),
                     static_cast<float>(q));
}

// ---- dispatch -----------------------------------------------------------------------------

// Element e of the block at `block` (e < block_size(type)). Unknown types give 0.
__device__ inline float dequant_in_block(const void* block, tensor::Type type, int e) {
    switch (static_cast<std::uint32_t>(type)) {
        case kF32: return static_cast<const float*>(block)[e];
        case kF16: {
            const auto* p = static_cast<const std::uint8_t*>(block) + 2 * e;
            return load_f16_le(p);
        }
        case kBF16: {
            const auto* p = static_cast<const std::uint8_t*>(block) + 2 * e;
            return bf16_bits_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
        }
        case kQ4_0: return dequant_q4_0(static_cast<const tensor::BlockQ4_0*>(block), e);
        case kQ4_1: return dequant_q4_1(static_cast<const tensor::BlockQ4_1*>(block), e);
        case kQ5_0: return dequant_q5_0(static_cast<const tensor::BlockQ5_0*>(block), e);
        case kQ5_1: return dequant_q5_1(static_cast<const tensor::BlockQ5_1*>(block), e);
        case kQ8_0: return dequant_q8_0(static_cast<const tensor::BlockQ8_0*>(block), e);
        case kQ2_K: return dequant_q2_k(static_cast<const tensor::BlockQ2_K*>(block), e);
        case kQ3_K: return dequant_q3_k(static_cast<const tensor::BlockQ3_K*>(block), e);
        case kQ4_K: return dequant_q4_k(static_cast<const tensor::BlockQ4_K*>(block), e);
        case kQ5_K: return dequant_q5_k(static_cast<const tensor::BlockQ5_K*>(block), e);
        case kQ6_K: return dequant_q6_k(static_cast<const tensor::BlockQ6_K*>(block), e);
        default: return 0.0f;
    }
}

// Element `index` of the row that starts at `row`. F32 rows must be 4-byte aligned (rows of a
// GGUF tensor are); every other format is read byte by byte.
__device__ inline float dequant_element(const void* row, tensor::Type type, std::int64_t index) {
    const std::int64_t bs = block_size(type);
    if (bs == 0) return 0.0f;
    const std::int64_t b = index / bs;
    const auto* block = static_cast<const std::uint8_t*>(row) + b * block_bytes(type);
    return dequant_in_block(block, type, static_cast<int>(index - b * bs));
}

// The whole block into out[0 .. block_size(type)).
__device__ inline void dequant_block(const void* block, tensor::Type type, float* out) {
    const int bs = static_cast<int>(block_size(type));
    for (int e = 0; e < bs; ++e) out[e] = dequant_in_block(block, type, e);
}

}  // namespace tokenscope::cuda::ops::dq
