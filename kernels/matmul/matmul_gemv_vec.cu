// Vectorised fused GEMV for the formats of the decode targets (F16, Q8_0, Q4_K). The reference
// kernel (matmul_gemv.cu) gives each lane whole 32-element chunks, so the 32 lanes of a warp
// read 32 chunks that lie 34 or 144 bytes apart with byte loads: many load instructions per
// useful byte. Here the lanes of a warp share the blocks of a row so that each load
// instruction of the warp reads one contiguous span with wide loads:
//   F16:  lane l reads 8 halves (16 bytes) at column 8 * (l + 32 i): 512 contiguous bytes.
//   Q8_0: 4 lanes per 34-byte block, 8 quants each (4 x 2-byte loads): 8 blocks per step.
//   Q4_K: 8 lanes per 144-byte super-block, 16 bytes of nibbles each (one 16-byte load):
//         4 super-blocks per step.
// Activations are read as float4. One warp per output row, 4 rows per thread block; f32
// accumulation (the sum order differs from the reference kernel's, within f32 rounding).
#include <string>

#include "matmul/dequant_blocks.cuh"
#include "matmul/gemv_row_dot.cuh"
#include "matmul/matmul.cuh"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda::detail {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

// The warp sum and 4-wide dot the fused GEMVs share (gemv_row_dot.cuh).
using rowdot::dot4;
using rowdot::warp_total;

template <int MaxTokens>
__device__ __forceinline__ void store_rows(float (&acc)[MaxTokens], int tokens, int lane, std::int64_t rows,
                                           std::int64_t r, float* y) {
#pragma unroll
    for (int t = 0; t < MaxTokens; ++t) {
        if (t < tokens) {
            const float v = warp_total(acc[t]);
            if (lane == 0) y[t * rows + r] = v;
        }
    }
}

template <int MaxTokens>
__global__ void __launch_bounds__(kThreads)
    gemv_f16_vec(const std::uint8_t* __restrict__ W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
                 const float* __restrict__ x, int tokens, float* __restrict__ y) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (r >= rows) return;  // uniform across the warp
    const auto* row = reinterpret_cast<const uint4*>(W + static_cast<std::size_t>(r) * row_bytes);
    float acc[MaxTokens] = {};
    const std::int64_t vectors = cols / 8;
    for (std::int64_t v = lane; v < vectors; v += 32) {
        const uint4 raw = __ldg(row + v);
        const auto* h = reinterpret_cast<const __half2*>(&raw);
        const float2 w01 = __half22float2(h[0]), w23 = __half22float2(h[1]);
        const float2 w45 = __half22float2(h[2]), w67 = __half22float2(h[3]);
#pragma unroll
        for (int t = 0; t < MaxTokens; ++t) {
            if (t < tokens) {
                const auto* xv = reinterpret_cast<const float4*>(x + t * cols + v * 8);
                acc[t] += dot4(xv[0], w01.x, w01.y, w23.x, w23.y) + dot4(xv[1], w45.x, w45.y, w67.x, w67.y);
            }
        }
    }
    store_rows(acc, tokens, lane, rows, r, y);
}

template <int MaxTokens>
__global__ void __launch_bounds__(kThreads)
    gemv_q8_0_vec(const std::uint8_t* __restrict__ W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
                  const float* __restrict__ x, int tokens, float* __restrict__ y) {
    constexpr int kBlockBytes = sizeof(tensor::BlockQ8_0);  // 34: 2-byte aligned
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int part = lane % 4;  // quants 8 * part .. 8 * part + 7 of the block
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (r >= rows) return;
    const std::uint8_t* row = W + static_cast<std::size_t>(r) * row_bytes;
    float acc[MaxTokens] = {};
    const std::int64_t blocks = cols / 32;
    for (std::int64_t b = lane / 4; b < blocks; b += 8) {
        const std::uint8_t* block = row + b * kBlockBytes;
        const float d = __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(block))));
        const auto* q16 = reinterpret_cast<const unsigned short*>(block + 2 + 8 * part);
        float q[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const unsigned short pair = __ldg(q16 + i);
            q[2 * i] = static_cast<float>(static_cast<std::int8_t>(pair & 0xFF));
            q[2 * i + 1] = static_cast<float>(static_cast<std::int8_t>(pair >> 8));
        }
#pragma unroll
        for (int t = 0; t < MaxTokens; ++t) {
            if (t < tokens) {
                const auto* xv = reinterpret_cast<const float4*>(x + t * cols + b * 32 + 8 * part);
                acc[t] += d * (dot4(xv[0], q[0], q[1], q[2], q[3]) + dot4(xv[1], q[4], q[5], q[6], q[7]));
            }
        }
    }
    store_rows(acc, tokens, lane, rows, r, y);
}

template <int MaxTokens>
__global__ void __launch_bounds__(kThreads)
    gemv_q4_k_vec(const std::uint8_t* __restrict__ W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
                  const float* __restrict__ x, int tokens, float* __restrict__ y) {
    constexpr int kBlockBytes = sizeof(tensor::BlockQ4_K);  // 144 = 9 x 16
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int part = lane % 8;         // qs bytes 16 * part .. 16 * part + 15
    const int group = part / 2;        // 64-element group: low nibbles sub-block 2g, high 2g + 1
    const int offset = 16 * (part % 2);  // first element of this lane inside each half-group
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (r >= rows) return;
    const std::uint8_t* row = W + static_cast<std::size_t>(r) * row_bytes;
    float acc[MaxTokens] = {};
    const std::int64_t blocks = cols / 256;
    for (std::int64_t b = lane / 8; b < blocks; b += 4) {
        const auto* block = reinterpret_cast<const tensor::BlockQ4_K*>(row + b * kBlockBytes);
        const float d = load_f16_dev(block->d);
        const float dmin = load_f16_dev(block->dmin);
        int sc_lo = 0, m_lo = 0, sc_hi = 0, m_hi = 0;
        scale_min_k4_dev(2 * group, block->scales, sc_lo, m_lo);
        scale_min_k4_dev(2 * group + 1, block->scales, sc_hi, m_hi);
        const float d_lo = d * static_cast<float>(sc_lo), min_lo = dmin * static_cast<float>(m_lo);
        const float d_hi = d * static_cast<float>(sc_hi), min_hi = dmin * static_cast<float>(m_hi);
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(block->qs + 16 * part));
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(&raw);
        float lo[16], hi[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            lo[i] = static_cast<float>(bytes[i] & 0xF);
            hi[i] = static_cast<float>(bytes[i] >> 4);
        }
        const std::int64_t first = b * 256 + 64 * group + offset;
#pragma unroll
        for (int t = 0; t < MaxTokens; ++t) {
            if (t < tokens) {
                const auto* xl = reinterpret_cast<const float4*>(x + t * cols + first);
                const auto* xh = reinterpret_cast<const float4*>(x + t * cols + first + 32);
                float q_lo = 0, s_lo = 0, q_hi = 0, s_hi = 0;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const float4 a = xl[k], c = xh[k];
                    q_lo += dot4(a, lo[4 * k], lo[4 * k + 1], lo[4 * k + 2], lo[4 * k + 3]);
                    s_lo += a.x + a.y + a.z + a.w;
                    q_hi += dot4(c, hi[4 * k], hi[4 * k + 1], hi[4 * k + 2], hi[4 * k + 3]);
                    s_hi += c.x + c.y + c.z + c.w;
                }
                acc[t] += d_lo * q_lo - min_lo * s_lo + d_hi * q_hi - min_hi * s_hi;
            }
        }
    }
    store_rows(acc, tokens, lane, rows, r, y);
}

// Batch-1 decode gets its own instantiation: one accumulator instead of eight leaves registers
// for loads in flight (ptxas: the 8-token Q4_K kernel uses 96 registers).
template <int MaxTokens>
void launch(tensor::Type type, const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
            const float* x, int tokens, float* y, cudaStream_t s) {
    const auto blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
    switch (type) {
        case tensor::Type::F16: gemv_f16_vec<MaxTokens><<<blocks, kThreads, 0, s>>>(W, row_bytes, rows, cols, x, tokens, y); break;
        case tensor::Type::Q8_0: gemv_q8_0_vec<MaxTokens><<<blocks, kThreads, 0, s>>>(W, row_bytes, rows, cols, x, tokens, y); break;
        default: gemv_q4_k_vec<MaxTokens><<<blocks, kThreads, 0, s>>>(W, row_bytes, rows, cols, x, tokens, y); break;
    }
}

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

}  // namespace

bool gemv_vectorized_supports(tensor::Type type, const void* W, std::int64_t cols, const float* x) {
    // x rows start at x + t * cols: 16-byte aligned when x is and cols is a multiple of 4.
    if (!aligned(x, 16) || cols % 8 != 0) return false;
    switch (type) {
        case tensor::Type::F16: return aligned(W, 16);
        case tensor::Type::Q8_0: return aligned(W, 2) && cols % 32 == 0;
        case tensor::Type::Q4_K: return aligned(W, 16) && cols % 256 == 0;
        default: return false;
    }
}

void launch_gemv_vectorized(tensor::Type type, const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows,
                            std::int64_t cols, const float* x, int tokens, float* y, cudaStream_t s) {
    if (!gemv_vectorized_supports(type, W, cols, x)) {
        throw InvalidArgument(std::string("matmul: no vectorised GEMV for ") + tensor::type_name(type) + " with cols=" +
                              std::to_string(cols) + " at these alignments");
    }
    if (tokens == 1) {
        launch<1>(type, W, row_bytes, rows, cols, x, tokens, y, s);
    } else {
        launch<kGemvMaxTokens>(type, W, row_bytes, rows, cols, x, tokens, y, s);
    }
    check_cuda(cudaGetLastError(), std::string("matmul: vectorised GEMV launch for ") + tensor::type_name(type));
}

}  // namespace tokenscope::cuda::detail
