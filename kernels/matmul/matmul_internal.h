#pragma once
// Shared by the matmul .cu files (and the matmul self-test): error checks that turn CUDA and
// cuBLAS statuses into tokenscope::Error, and the kernel launchers of each .cu file.
// Includes CUDA headers: not for the engine.
#include <cstddef>
#include <cstdint>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "tensor/type.h"
#include "util/error.h"

namespace tokenscope::cuda::detail {

// `what` names the call ("cudaMalloc(4096 bytes)"); the message adds the status name and text.
inline void check_cuda(cudaError_t status, const std::string& what) {
    if (status == cudaSuccess) return;
    throw Error(what + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                ")");
}

inline void check_cublas(cublasStatus_t status, const std::string& what) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    throw Error(what + " failed: " + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + ")");
}

// matmul_gemv.cu: y[t*rows + r] = W[r] . x[t] for tokens in 1..kGemvMaxTokens, f32 accumulation.
void launch_gemv(tensor::Type type, const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows,
                 std::int64_t cols, const float* x, int tokens, float* y, cudaStream_t s);

// matmul_gemv_vec.cu: the same product with lanes sharing blocks and wide loads, for F16, Q8_0
// and Q4_K. `supports` says whether the type, width and alignments allow it.
bool gemv_vectorized_supports(tensor::Type type, const void* W, std::int64_t cols, const float* x);
void launch_gemv_vectorized(tensor::Type type, const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows,
                            std::int64_t cols, const float* x, int tokens, float* y, cudaStream_t s);

// matmul_gemv_int8_q8_0.cu / matmul_gemv_int8_q4_k.cu: y[r] = W[r] . (q * d) for one token,
// with the activation quantized by quantize_x8 (q: cols int8 values, d: one scale per 32).
void launch_gemv_int8_q8_0(const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
                           const std::int8_t* q, const float* d, float* y, cudaStream_t s);
void launch_gemv_int8_q4_k(const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
                           const std::int8_t* q, const float* d, float* y, cudaStream_t s);

// matmul_dequant.cu: rows [0, rows) of W (row stride row_bytes) into a dense row-major
// [rows][cols] array of `out_type` (CUDA_R_16F or CUDA_R_16BF), rounded to nearest even.
void launch_dequantize_rows(tensor::Type type, const std::uint8_t* W, std::size_t row_bytes,
                            std::int64_t rows, std::int64_t cols, cudaDataType out_type, void* out,
                            cudaStream_t s);

// matmul_dequant.cu: n floats into `out_type` (CUDA_R_16F or CUDA_R_16BF).
void launch_convert_f32(const float* in, std::int64_t n, cudaDataType out_type, void* out,
                        cudaStream_t s);

}  // namespace tokenscope::cuda::detail
