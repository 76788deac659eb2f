#include "lab/peaks.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>

#include "device_buffer.h"
#include "lab/event_timer.h"
#include "matmul/matmul.cuh"
#include "matmul/matmul_internal.h"
#include "ops/check.h"

namespace tokenscope::cuda::lab {

namespace {

// Small non-zero values (a hash of the index): tensor-core timing can depend on the data's
// switching activity, and zeros would flatter the measurement.
__global__ void fill_bf16(__nv_bfloat16* out, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const auto h = static_cast<std::uint32_t>(i) * 2654435761u;
        out[i] = __float2bfloat16(static_cast<float>(h >> 8) * (1.0f / 16777216.0f) - 0.5f);
    }
}

}  // namespace

runtime::GpuPeaks measure_peaks(int m, int n, int k) {
    runtime::GpuPeaks peaks;
    cudaDeviceProp prop{};
    TOKENSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    peaks.device_name = prop.name;
    const ScopedStream scoped;
    cudaStream_t stream = scoped.get();
    EventTimer timer;

    // Copy: 1 GiB (or a quarter of free memory) each way, far beyond the 50-60 MB L2 of a
    // Hopper part, so every byte comes from and goes to HBM.
    std::size_t free_bytes = 0, total_bytes = 0;
    TOKENSCOPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, free_bytes / 4) & ~std::size_t{4095};
    {
        DeviceBuffer a(bytes, "copy bandwidth source"), b(bytes, "copy bandwidth destination");
        a.zero(stream);
        const double seconds = timer.median_seconds(stream, 2, 10, [&] {
            TOKENSCOPE_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream));
        });
        peaks.copy_gbps = 2.0 * static_cast<double>(bytes) / seconds * 1e-9;  // read + write
    }

    // bf16 GEMM exactly as matmul_gemm issues it: W [m][k] row-major (cuBLAS: k x m, transposed),
    // x [n][k], y [n][m] in f32, f32 accumulation.
    {
        DeviceBuffer w(static_cast<std::size_t>(m) * k * 2, "GEMM peak A"), x(static_cast<std::size_t>(n) * k * 2, "GEMM peak B");
        DeviceBuffer y(static_cast<std::size_t>(m) * n * 4, "GEMM peak C");
        fill_bf16<<<1024, 256, 0, stream>>>(w.as<__nv_bfloat16>(), static_cast<std::int64_t>(m) * k);
        fill_bf16<<<1024, 256, 0, stream>>>(x.as<__nv_bfloat16>(), static_cast<std::int64_t>(n) * k);
        TOKENSCOPE_CUDA_CHECK_LAUNCH("fill_bf16");
        MatmulWorkspace ws;
        cublasHandle_t handle = ws.cublas();
        detail::check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
        const float alpha = 1.0f, beta = 0.0f;
        const double seconds = timer.median_seconds(stream, 3, 20, [&] {
            detail::check_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.data(), CUDA_R_16BF, k,
                                              x.data(), CUDA_R_16BF, k, &beta, y.data(), CUDA_R_32F, m,
                                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                                 "cublasGemmEx (bf16 peak)");
        });
        peaks.bf16_gemm_tflops = 2.0 * m * static_cast<double>(n) * k / seconds * 1e-12;
        peaks.gemm_m = m;
        peaks.gemm_n = n;
        peaks.gemm_k = k;
    }
    return peaks;
}

}  // namespace tokenscope::cuda::lab
