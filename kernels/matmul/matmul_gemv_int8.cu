// The int8 GEMV path's host side (see matmul.cuh): the activation quantizer (its kernel is here)
// and the dispatch to the dp4a kernels (matmul_gemv_int8_q8_0.cu, matmul_gemv_int8_q4_k.cu).
//
// quantize_x8: the activation vector of a decode step as int8 in 32-element blocks with one f32
// scale each. One warp per
// block: lane i holds element i, the block's max |x| by warp shuffles. The formula is kv_append's
// Q8 row quantization (IEEE division, round half away from zero), so the host can repeat it bit
// for bit, and the self-test does.
#include <string>

#include "matmul/matmul.cuh"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda {

namespace {

constexpr int kWarps = 4;

__global__ void __launch_bounds__(32 * kWarps)
    quantize_x8_kernel(const float* __restrict__ x, std::int64_t blocks, std::int8_t* __restrict__ q,
                       float* __restrict__ d) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (b >= blocks) return;  // uniform across the warp
    const float v = x[b * 32 + lane];
    float amax = fabsf(v);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    const float scale = __fdiv_rn(amax, 127.0f);
    const float r = scale == 0.0f ? 0.0f : roundf(__fdiv_rn(v, scale));
    q[b * 32 + lane] = static_cast<std::int8_t>(fminf(fmaxf(r, -127.0f), 127.0f));
    if (lane == 0) d[b] = scale;
}

}  // namespace

std::size_t quantized_x_scales_offset(std::int64_t cols) {
    return (static_cast<std::size_t>(cols) + 255) / 256 * 256;  // scales 16-byte aligned after the int8 values
}

std::size_t quantized_x_bytes(std::int64_t cols) {
    return quantized_x_scales_offset(cols) + static_cast<std::size_t>(cols / 32) * sizeof(float);
}

void quantize_x8(const float* x, std::int64_t cols, void* xq, cudaStream_t s) {
    if (cols <= 0 || cols % 32 != 0) {
        throw InvalidArgument("quantize_x8: cols=" + std::to_string(cols) + " is not a positive multiple of 32");
    }
    const std::int64_t blocks = cols / 32;
    auto* base = static_cast<unsigned char*>(xq);
    quantize_x8_kernel<<<static_cast<unsigned>((blocks + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(
        x, blocks, reinterpret_cast<std::int8_t*>(base), reinterpret_cast<float*>(base + quantized_x_scales_offset(cols)));
    detail::check_cuda(cudaGetLastError(), "quantize_x8 launch");
}

namespace {
bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }
}  // namespace

bool gemv_int8_supports(tensor::Type type, const void* W, std::int64_t cols) {
    switch (type) {
        case tensor::Type::Q8_0: return cols > 0 && cols % 32 == 0 && aligned(W, 2);
        case tensor::Type::Q4_K: return cols > 0 && cols % 256 == 0 && aligned(W, 16);
        default: return false;
    }
}

void matmul_gemv_int8(tensor::Type type, const void* W, std::int64_t rows, std::int64_t cols, const void* xq, float* y,
                      cudaStream_t s) {
    if (!gemv_int8_supports(type, W, cols) || !aligned(xq, 16)) {
        throw InvalidArgument(std::string("matmul: no int8 GEMV for ") + tensor::type_name(type) + " with cols=" +
                              std::to_string(cols) + " at these alignments");
    }
    if (rows <= 0) return;
    const auto* base = static_cast<const unsigned char*>(xq);
    const auto* q = reinterpret_cast<const std::int8_t*>(base);
    const auto* d = reinterpret_cast<const float*>(base + quantized_x_scales_offset(cols));
    const auto* w = static_cast<const std::uint8_t*>(W);
    if (type == tensor::Type::Q8_0) {
        detail::launch_gemv_int8_q8_0(w, tensor::row_bytes(type, cols), rows, cols, q, d, y, s);
    } else {
        detail::launch_gemv_int8_q4_k(w, tensor::row_bytes(type, cols), rows, cols, q, d, y, s);
    }
}

}  // namespace tokenscope::cuda
