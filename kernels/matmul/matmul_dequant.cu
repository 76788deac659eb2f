// Dequantization of weight rows into 16-bit floats (f16 or bf16) for the cuBLAS path, and the
// conversion of f32 activations to the same type. One thread per 32-element chunk (quantized
// formats) or per element (F32/F16/BF16), grid-stride loops so any size fits one launch.
#include <algorithm>
#include <string>

#include "matmul/dequant_blocks.cuh"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda::detail {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65536;

template <typename Out>
__device__ __forceinline__ Out round_to(float v);
template <>
__device__ __forceinline__ __half round_to<__half>(float v) {
    return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 round_to<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

unsigned grid_for(std::int64_t work) {
    const std::int64_t blocks = std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks);
    return static_cast<unsigned>(blocks);
}

template <tensor::Type T, typename Out>
__global__ void __launch_bounds__(kThreads)
    dequantize_rows_kernel(const std::uint8_t* __restrict__ W, std::size_t row_bytes,
                           std::int64_t rows, std::int64_t cols, Out* __restrict__ out) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if constexpr (kIsFloatType<T>) {
        const std::int64_t total = rows * cols;
        for (std::int64_t idx = first; idx < total; idx += stride) {
            const std::int64_t r = idx / cols;
            const std::int64_t c = idx % cols;
            out[idx] = round_to<Out>(load_float_weight<T>(W + static_cast<std::size_t>(r) * row_bytes, c));
        }
    } else {
        using Info = QuantInfo<T>;
        const std::int64_t chunks = cols / kChunk;
        const std::int64_t total = rows * chunks;
        for (std::int64_t idx = first; idx < total; idx += stride) {
            const std::int64_t r = idx / chunks;
            const std::int64_t c = idx % chunks;
            float v[kChunk];
            dequant_chunk<T>(W + static_cast<std::size_t>(r) * row_bytes +
                                 static_cast<std::size_t>(c / Info::kChunks) * Info::kBytes,
                             static_cast<int>(c % Info::kChunks), v);
            Out* o = out + r * cols + c * kChunk;
#pragma unroll
            for (int i = 0; i < kChunk; ++i) o[i] = round_to<Out>(v[i]);
        }
    }
}

template <typename Out>
__global__ void __launch_bounds__(kThreads)
    convert_kernel(const float* __restrict__ in, std::int64_t n, Out* __restrict__ out) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        out[i] = round_to<Out>(in[i]);
    }
}

template <tensor::Type T, typename Out>
void launch(const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
            Out* out, cudaStream_t s) {
    const std::int64_t work = kIsFloatType<T> ? rows * cols : rows * (cols / kChunk);
    dequantize_rows_kernel<T, Out><<<grid_for(work), kThreads, 0, s>>>(W, row_bytes, rows, cols, out);
    check_cuda(cudaGetLastError(),
               std::string("matmul: dequantize kernel launch for ") + tensor::type_name(T));
}

template <typename Out>
void dispatch(tensor::Type type, const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows,
              std::int64_t cols, Out* out, cudaStream_t s) {
    using tensor::Type;
    switch (type) {
        case Type::F32: return launch<Type::F32>(W, row_bytes, rows, cols, out, s);
        case Type::F16: return launch<Type::F16>(W, row_bytes, rows, cols, out, s);
        case Type::BF16: return launch<Type::BF16>(W, row_bytes, rows, cols, out, s);
        case Type::Q4_0: return launch<Type::Q4_0>(W, row_bytes, rows, cols, out, s);
        case Type::Q4_1: return launch<Type::Q4_1>(W, row_bytes, rows, cols, out, s);
        case Type::Q5_0: return launch<Type::Q5_0>(W, row_bytes, rows, cols, out, s);
        case Type::Q5_1: return launch<Type::Q5_1>(W, row_bytes, rows, cols, out, s);
        case Type::Q8_0: return launch<Type::Q8_0>(W, row_bytes, rows, cols, out, s);
        case Type::Q2_K: return launch<Type::Q2_K>(W, row_bytes, rows, cols, out, s);
        case Type::Q3_K: return launch<Type::Q3_K>(W, row_bytes, rows, cols, out, s);
        case Type::Q4_K: return launch<Type::Q4_K>(W, row_bytes, rows, cols, out, s);
        case Type::Q5_K: return launch<Type::Q5_K>(W, row_bytes, rows, cols, out, s);
        case Type::Q6_K: return launch<Type::Q6_K>(W, row_bytes, rows, cols, out, s);
    }
    throw InvalidArgument("matmul: no dequantize kernel for tensor type id " +
                          std::to_string(static_cast<std::uint32_t>(type)));
}

void check_out_type(cudaDataType out_type) {
    if (out_type != CUDA_R_16F && out_type != CUDA_R_16BF) {
        throw InvalidArgument("matmul: 16-bit output type must be CUDA_R_16F or CUDA_R_16BF, got " +
                              std::to_string(static_cast<int>(out_type)));
    }
}

}  // namespace

void launch_dequantize_rows(tensor::Type type, const std::uint8_t* W, std::size_t row_bytes,
                            std::int64_t rows, std::int64_t cols, cudaDataType out_type, void* out,
                            cudaStream_t s) {
    check_out_type(out_type);
    if (out_type == CUDA_R_16F) {
        dispatch(type, W, row_bytes, rows, cols, static_cast<__half*>(out), s);
    } else {
        dispatch(type, W, row_bytes, rows, cols, static_cast<__nv_bfloat16*>(out), s);
    }
}

void launch_convert_f32(const float* in, std::int64_t n, cudaDataType out_type, void* out,
                        cudaStream_t s) {
    check_out_type(out_type);
    if (out_type == CUDA_R_16F) {
        convert_kernel<__half><<<grid_for(n), kThreads, 0, s>>>(in, n, static_cast<__half*>(out));
    } else {
        convert_kernel<__nv_bfloat16>
            <<<grid_for(n), kThreads, 0, s>>>(in, n, static_cast<__nv_bfloat16*>(out));
    }
    check_cuda(cudaGetLastError(), "matmul: f32 -> 16-bit conversion kernel launch");
}

}  // namespace tokenscope::cuda::detail
