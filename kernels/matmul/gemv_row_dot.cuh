#pragma once
// One warp's dot products of N weight rows (same type, same width) with one activation vector,
// for the fused decode GEMVs (matmul_gemv_gate_up.cu, matmul_gemv_qkv.cu). The lane layout and
// the arithmetic per block are those of the vectorised GEMV (matmul_gemv_vec.cu, its batch-1
// instantiation; see its header comment for why lanes share blocks):
//   F16:  lane l reads 8 halves (16 bytes) at column 8 * (l + 32 i);
//   Q8_0: 4 lanes per 34-byte block, 8 quants each, 8 blocks per warp step;
//   Q4_K: 8 lanes per 144-byte super-block, 16 bytes of nibbles each, 4 super-blocks per step.
// With N > 1 the N rows are walked in the same loop: the activation values are loaded once for
// all N, and N rows' loads are in flight together (gate and up rows of the same index).
// Returns each lane's partial sums; warp_total() adds them up. Device-only header.
#include <cstdint>

#include <cuda_fp16.h>

#include "matmul/dequant_blocks.cuh"
#include "tensor/type.h"

namespace tokenscope::cuda::detail::rowdot {

__device__ __forceinline__ float warp_total(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;  // in every lane
}

__device__ __forceinline__ float dot4(float4 a, float b0, float b1, float b2, float b3) {
    return a.x * b0 + a.y * b1 + a.z * b2 + a.w * b3;
}

template <int N>
__device__ __forceinline__ void f16(const std::uint8_t* const (&rows)[N], std::int64_t cols, const float* __restrict__ x,
                                    int lane, float (&acc)[N]) {
    const std::int64_t vectors = cols / 8;
    for (std::int64_t v = lane; v < vectors; v += 32) {
        uint4 raw[N];
#pragma unroll
        for (int n = 0; n < N; ++n) raw[n] = __ldg(reinterpret_cast<const uint4*>(rows[n]) + v);
        const auto* xv = reinterpret_cast<const float4*>(x + v * 8);
        const float4 x0 = xv[0], x1 = xv[1];
#pragma unroll
        for (int n = 0; n < N; ++n) {
            const auto* h = reinterpret_cast<const __half2*>(&raw[n]);
            const float2 w01 = __half22float2(h[0]), w23 = __half22float2(h[1]);
            const float2 w45 = __half22float2(h[2]), w67 = __half22float2(h[3]);
            acc[n] += dot4(x0, w01.x, w01.y, w23.x, w23.y) + dot4(x1, w45.x, w45.y, w67.x, w67.y);
        }
    }
}

template <int N>
__device__ __forceinline__ void q8_0(const std::uint8_t* const (&rows)[N], std::int64_t cols, const float* __restrict__ x,
                                     int lane, float (&acc)[N]) {
    constexpr int kBlockBytes = sizeof(tensor::BlockQ8_0);  // 34: 2-byte aligned
    const int part = lane % 4;                              // quants 8 * part .. 8 * part + 7
    const std::int64_t blocks = cols / 32;
    for (std::int64_t b = lane / 4; b < blocks; b += 8) {
        const auto* xv = reinterpret_cast<const float4*>(x + b * 32 + 8 * part);
        const float4 x0 = xv[0], x1 = xv[1];
#pragma unroll
        for (int n = 0; n < N; ++n) {
            const std::uint8_t* block = rows[n] + b * kBlockBytes;
            const float d = __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(block))));
            const auto* q16 = reinterpret_cast<const unsigned short*>(block + 2 + 8 * part);
            float q[8];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const unsigned short pair = __ldg(q16 + i);
                q[2 * i] = static_cast<float>(static_cast<std::int8_t>(pair & 0xFF));
                q[2 * i + 1] = static_cast<float>(static_cast<std::int8_t>(pair >> 8));
            }
            acc[n] += d * (dot4(x0, q[0], q[1], q[2], q[3]) + dot4(x1, q[4], q[5], q[6], q[7]));
        }
    }
}

template <int N>
__device__ __forceinline__ void q4_k(const std::uint8_t* const (&rows)[N], std::int64_t cols, const float* __restrict__ x,
                                     int lane, float (&acc)[N]) {
    constexpr int kBlockBytes = sizeof(tensor::BlockQ4_K);  // 144 = 9 x 16
    const int part = lane % 8;                              // qs bytes 16 * part .. 16 * part + 15
    const int group = part / 2;          // 64-element group: low nibbles sub-block 2g, high 2g + 1
    const int offset = 16 * (part % 2);  // first element of this lane inside each half-group
    const std::int64_t blocks = cols / 256;
    for (std::int64_t b = lane / 8; b < blocks; b += 4) {
        const std::int64_t first = b * 256 + 64 * group + offset;
        const auto* xl = reinterpret_cast<const float4*>(x + first);
        const auto* xh = reinterpret_cast<const float4*>(x + first + 32);
        float4 a[4], c[4];
        float s_lo = 0, s_hi = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            a[k] = xl[k];
            c[k] = xh[k];
            s_lo += a[k].x + a[k].y + a[k].z + a[k].w;
            s_hi += c[k].x + c[k].y + c[k].z + c[k].w;
        }
#pragma unroll
        for (int n = 0; n < N; ++n) {
            const auto* block = reinterpret_cast<const tensor::BlockQ4_K*>(rows[n] + b * kBlockBytes);
            const float d = load_f16_dev(block->d);
            const float dmin = load_f16_dev(block->dmin);
            int sc_lo = 0, m_lo = 0, sc_hi = 0, m_hi = 0;
            scale_min_k4_dev(2 * group, block->scales, sc_lo, m_lo);
            scale_min_k4_dev(2 * group + 1, block->scales, sc_hi, m_hi);
            const float d_lo = d * static_cast<float>(sc_lo), min_lo = dmin * static_cast<float>(m_lo);
            const float d_hi = d * static_cast<float>(sc_hi), min_hi = dmin * static_cast<float>(m_hi);
            const uint4 raw = __ldg(reinterpret_cast<const uint4*>(block->qs + 16 * part));
            const auto* bytes = reinterpret_cast<const std::uint8_t*>(&raw);
            float q_lo = 0, q_hi = 0;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                q_lo += dot4(a[k], static_cast<float>(bytes[4 * k] & 0xF), static_cast<float>(bytes[4 * k + 1] & 0xF),
                             static_cast<float>(bytes[4 * k + 2] & 0xF), static_cast<float>(bytes[4 * k + 3] & 0xF));
                q_hi += dot4(c[k], static_cast<float>(bytes[4 * k] >> 4), static_cast<float>(bytes[4 * k + 1] >> 4),
                             static_cast<float>(bytes[4 * k + 2] >> 4), static_cast<float>(bytes[4 * k + 3] >> 4));
            }
            acc[n] += d_lo * q_lo - min_lo * s_lo + d_hi * q_hi - min_hi * s_hi;
        }
    }
}

template <tensor::Type T, int N>
__device__ __forceinline__ void rows_dot(const std::uint8_t* const (&rows)[N], std::int64_t cols,
                                         const float* __restrict__ x, int lane, float (&acc)[N]) {
    static_assert(T == tensor::Type::F16 || T == tensor::Type::Q8_0 || T == tensor::Type::Q4_K);
    if constexpr (T == tensor::Type::F16) {
        f16<N>(rows, cols, x, lane, acc);
    } else if constexpr (T == tensor::Type::Q8_0) {
        q8_0<N>(rows, cols, x, lane, acc);
    } else {
        q4_k<N>(rows, cols, x, lane, acc);
    }
}

}  // namespace tokenscope::cuda::detail::rowdot
