#pragma once
// Device dequantization of the ggml block formats, one "chunk" of 32 consecutive elements at a
// time: a legacy block (Q4_0 .. Q8_0) is one chunk, a K-quant super-block is eight. Both the
// fused GEMV and the dequantize-to-f16 kernel of the GEMM path call these functions, so one
// place decides where element e of a block lives.
//
// Bit-exact with engine/tensor/dequantize_legacy.cpp and dequantize_kquants.cpp: the same
// operations in the same order, written with __fmul_rn / __fadd_rn / __fsub_rn so that nvcc can
// never contract them into an FMA (which would round once instead of twice and differ from the
// CPU in the last bit). Block layouts come from engine/tensor/block_layouts.h (byte arrays,
// alignment 1), so a block may sit at any byte address.
//
// Device-only header: include it from .cu files only.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "tensor/block_layouts.h"
#include "tensor/type.h"

namespace tokenscope::cuda::detail {

inline constexpr int kChunk = 32;  // elements per chunk

__device__ __forceinline__ float load_f16_dev(const std::uint8_t* p) {
    const unsigned short bits = static_cast<unsigned short>(p[0] | (p[1] << 8));
    return __half2float(__ushort_as_half(bits));  // exact
}

__device__ __forceinline__ float load_bf16_dev(const std::uint8_t* p) {
    const unsigned bits = static_cast<unsigned>(p[0] | (p[1] << 8));
    return __uint_as_float(bits << 16);  // exact: a bfloat16 is the upper half of a float
}

__device__ __forceinline__ std::uint32_t load_u32_le(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
           (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// Same bit positions as tensor::unpack_scale_min_k4 (kquant_scales.h).
__device__ __forceinline__ void scale_min_k4_dev(int j, const std::uint8_t* scales, int& sc,
                                                 int& m) {
    if (j < 4) {
        sc = scales[j] & 63;
        m = scales[j + 4] & 63;
    } else {
        sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
        m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
    }
}

// Same as tensor::unpack_scale_q3_k: the signed 6-bit scale of sub-block s (0..15).
__device__ __forceinline__ int scale_q3_k_dev(int s, const std::uint8_t* scales) {
    const int low = s < 8 ? (scales[s] & 0xF) : (scales[s - 8] >> 4);
    const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// F32 / F16 / BF16: element c of a row. The launcher checks that the row start is aligned for
// the element type (4 bytes for F32, 2 for F16/BF16).
template <tensor::Type T>
__device__ __forceinline__ float load_float_weight(const std::uint8_t* row, std::int64_t c) {
    static_assert(T == tensor::Type::F32 || T == tensor::Type::F16 || T == tensor::Type::BF16);
    if constexpr (T == tensor::Type::F32) {
        return reinterpret_cast<const float*>(row)[c];
    } else if constexpr (T == tensor::Type::F16) {
        return __half2float(__ushort_as_half(reinterpret_cast<const unsigned short*>(row)[c]));
    } else {
        const unsigned bits = reinterpret_cast<const unsigned short*>(row)[c];
        return __uint_as_float(bits << 16);
    }
}

template <tensor::Type T>
inline constexpr bool kIsFloatType =
    T == tensor::Type::F32 || T == tensor::Type::F16 || T == tensor::Type::BF16;

// Compile-time facts of each quantized format.
template <tensor::Type T>
struct QuantInfo;
template <>
struct QuantInfo<tensor::Type::Q4_0> {
    static constexpr int kBytes = sizeof(tensor::BlockQ4_0);
    static constexpr int kChunks = 1;
};
template <>
struct QuantInfo<tensor::Type::Q4_1> {
    static constexpr int kBytes = sizeof(tensor::BlockQ4_1);
    static constexpr int kChunks = 1;
};
template <>
struct QuantInfo<tensor::Type::Q5_0> {
    static constexpr int kBytes = sizeof(tensor::BlockQ5_0);
    static constexpr int kChunks = 1;
};
template <>
struct QuantInfo<tensor::Type::Q5_1> {
    static constexpr int kBytes = sizeof(tensor::BlockQ5_1);
    static constexpr int kChunks = 1;
};
template <>
struct QuantInfo<tensor::Type::Q8_0> {
    static constexpr int kBytes = sizeof(tensor::BlockQ8_0);
    static constexpr int kChunks = 1;
};
template <>
struct QuantInfo<tensor::Type::Q2_K> {
    static constexpr int kBytes = sizeof(tensor::BlockQ2_K);
    static constexpr int kChunks = 8;
};
template <>
struct QuantInfo<tensor::Type::Q3_K> {
    static constexpr int kBytes = sizeof(tensor::BlockQ3_K);
    static constexpr int kChunks = 8;
};
template <>
struct QuantInfo<tensor::Type::Q4_K> {
    static constexpr int kBytes = sizeof(tensor::BlockQ4_K);
    static constexpr int kChunks = 8;
};
template <>
struct QuantInfo<tensor::Type::Q5_K> {
    static constexpr int kBytes = sizeof(tensor::BlockQ5_K);
    static constexpr int kChunks = 8;
};
template <>
struct QuantInfo<tensor::Type::Q6_K> {
    static constexpr int kBytes = sizeof(tensor::BlockQ6_K);
    static constexpr int kChunks = 8;
};

// Writes elements 32*sub .. 32*sub+31 of the block at `block` into v[0..31].
// `sub` is 0 for the legacy formats and 0..7 for the K-quants.
template <tensor::Type T>
__device__ __forceinline__ void dequant_chunk(const std::uint8_t* block, int sub, float (&v)[kChunk]);

template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q4_0>(const std::uint8_t* block, int,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ4_0*>(block);
    const float d = load_f16_dev(b->d);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        v[j] = __fmul_rn(static_cast<float>((b->qs[j] & 0xF) - 8), d);
        v[j + 16] = __fmul_rn(static_cast<float>((b->qs[j] >> 4) - 8), d);
    }
}

template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q4_1>(const std::uint8_t* block, int,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ4_1*>(block);
    const float d = load_f16_dev(b->d);
    const float m = load_f16_dev(b->m);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        v[j] = __fadd_rn(__fmul_rn(static_cast<float>(b->qs[j] & 0xF), d), m);
        v[j + 16] = __fadd_rn(__fmul_rn(static_cast<float>(b->qs[j] >> 4), d), m);
    }
}

template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q5_0>(const std::uint8_t* block, int,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ5_0*>(block);
    const float d = load_f16_dev(b->d);
    const std::uint32_t qh = load_u32_le(b->qh);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        v[j] = __fmul_rn(static_cast<float>(((b->qs[j] & 0xF) | hi0) - 16), d);
        v[j + 16] = __fmul_rn(static_cast<float>(((b->qs[j] >> 4) | hi1) - 16), d);
    }
}

template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q5_1>(const std::uint8_t* block, int,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ5_1*>(block);
    const float d = load_f16_dev(b->d);
    const float m = load_f16_dev(b->m);
    const std::uint32_t qh = load_u32_le(b->qh);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        v[j] = __fadd_rn(__fmul_rn(static_cast<float>((b->qs[j] & 0xF) | hi0), d), m);
        v[j + 16] = __fadd_rn(__fmul_rn(static_cast<float>((b->qs[j] >> 4) | hi1), d), m);
    }
}

template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q8_0>(const std::uint8_t* block, int,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ8_0*>(block);
    const float d = load_f16_dev(b->d);
#pragma unroll
    for (int j = 0; j < 32; ++j) v[j] = __fmul_rn(static_cast<float>(b->qs[j]), d);
}

// Element e = 32*sub + i: half h = sub/4 uses qs[32h .. 32h+31], 2-bit field at bit 2*(sub%4),
// sub-block of 16 s = e/16 = 2*sub + i/16.
template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q2_K>(const std::uint8_t* block, int sub,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ2_K*>(block);
    const float d = load_f16_dev(b->d);
    const float dmin = load_f16_dev(b->dmin);
    const std::uint8_t* q = b->qs + 32 * (sub / 4);
    const int shift = 2 * (sub % 4);
#pragma unroll
    for (int part = 0; part < 2; ++part) {
        const int s = 2 * sub + part;
        const float dl = __fmul_rn(d, static_cast<float>(b->scales[s] & 0xF));
        const float ml = __fmul_rn(dmin, static_cast<float>(b->scales[s] >> 4));
#pragma unroll
        for (int l = 0; l < 16; ++l) {
            const int i = 16 * part + l;
            v[i] = __fsub_rn(__fmul_rn(dl, static_cast<float>((q[i] >> shift) & 3)), ml);
        }
    }
}

// Element e = 32*sub + i: low 2 bits as in Q2_K; the high bit is bit `sub` of hmask[i]
// (set: value = low, clear: value = low - 4); sub-block s = 2*sub + i/16.
template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q3_K>(const std::uint8_t* block, int sub,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ3_K*>(block);
    const float d = load_f16_dev(b->d);
    const std::uint8_t* q = b->qs + 32 * (sub / 4);
    const int shift = 2 * (sub % 4);
    const unsigned mask = 1u << sub;
#pragma unroll
    for (int part = 0; part < 2; ++part) {
        const int s = 2 * sub + part;
        const float dl = __fmul_rn(d, static_cast<float>(scale_q3_k_dev(s, b->scales)));
#pragma unroll
        for (int l = 0; l < 16; ++l) {
            const int i = 16 * part + l;
            const int low = (q[i] >> shift) & 3;
            const int value = low - ((b->hmask[i] & mask) != 0 ? 0 : 4);
            v[i] = __fmul_rn(dl, static_cast<float>(value));
        }
    }
}

// Sub-block sub (of 32): nibbles of qs[32*(sub/2) + i], low for even sub, high for odd.
template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q4_K>(const std::uint8_t* block, int sub,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ4_K*>(block);
    const float d = load_f16_dev(b->d);
    const float dmin = load_f16_dev(b->dmin);
    int sc = 0;
    int m = 0;
    scale_min_k4_dev(sub, b->scales, sc, m);
    const float d1 = __fmul_rn(d, static_cast<float>(sc));
    const float m1 = __fmul_rn(dmin, static_cast<float>(m));
    const std::uint8_t* q = b->qs + 32 * (sub / 2);
    const int shift = 4 * (sub % 2);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        v[i] = __fsub_rn(__fmul_rn(d1, static_cast<float>((q[i] >> shift) & 0xF)), m1);
    }
}

// As Q4_K; bit `sub` of qh[i] adds 16.
template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q5_K>(const std::uint8_t* block, int sub,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ5_K*>(block);
    const float d = load_f16_dev(b->d);
    const float dmin = load_f16_dev(b->dmin);
    int sc = 0;
    int m = 0;
    scale_min_k4_dev(sub, b->scales, sc, m);
    const float d1 = __fmul_rn(d, static_cast<float>(sc));
    const float m1 = __fmul_rn(dmin, static_cast<float>(m));
    const std::uint8_t* q = b->qs + 32 * (sub / 2);
    const int shift = 4 * (sub % 2);
    const unsigned bit = 1u << sub;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int value = ((q[i] >> shift) & 0xF) + ((b->qh[i] & bit) != 0 ? 16 : 0);
        v[i] = __fsub_rn(__fmul_rn(d1, static_cast<float>(value)), m1);
    }
}

// Element e = 128n + 32k + i with n = sub/4, k = sub%4: low 4 bits in ql[64n + 32*(k%2) + i]
// (low nibble for k < 2), high 2 bits in qh[32n + i] at bit 2k; scale index 8n + 2k + i/16.
// Value (d * scale) * (q - 32), in that order as on the CPU.
template <>
__device__ __forceinline__ void dequant_chunk<tensor::Type::Q6_K>(const std::uint8_t* block, int sub,
                                                                  float (&v)[kChunk]) {
    const auto* b = reinterpret_cast<const tensor::BlockQ6_K*>(block);
    const float d = load_f16_dev(b->d);
    const int n = sub / 4;
    const int k = sub % 4;
    const std::uint8_t* ql = b->ql + 64 * n + 32 * (k % 2);
    const std::uint8_t* qh = b->qh + 32 * n;
    const int low_shift = k < 2 ? 0 : 4;
    const int high_shift = 2 * k;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const float ds = __fmul_rn(d, static_cast<float>(b->scales[8 * n + 2 * k + half]));
#pragma unroll
        for (int l = 0; l < 16; ++l) {
            const int i = 16 * half + l;
            const int q = (((ql[i] >> low_shift) & 0xF) | (((qh[i] >> high_shift) & 3) << 4)) - 32;
            v[i] = __fmul_rn(ds, static_cast<float>(q));
        }
    }
}

}  // namespace tokenscope::cuda::detail
