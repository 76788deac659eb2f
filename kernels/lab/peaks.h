#pragma once
// The device's measured ceilings (runtime/gpu_plugin.h GpuPeaks). Host-only interface.
#include "runtime/gpu_plugin.h"

namespace tokenscope::cuda::lab {

// Device 0: cudaMemcpy device-to-device bandwidth on a buffer far larger than L2, and the rate
// of cublasGemmEx bf16 x bf16 -> f32 (the prefill path's own call) at m x n x k. Throws
// tokenscope::Error when CUDA or cuBLAS fails.
runtime::GpuPeaks measure_peaks(int gemm_m, int gemm_n, int gemm_k);

}  // namespace tokenscope::cuda::lab
