#include "ops/rms_norm.cuh"

#include <string>

#include "ops/check.h"
#include "ops/reduce.cuh"

namespace tokenscope::cuda::ops {

namespace {

// One block per row. x and out may alias: every thread reads x[i] before it writes out[i] and
// only touches the indices it owns.
__global__ void rms_norm_kernel(const float* x, const float* weight, float* out, int n,
                                float eps) {
    const std::int64_t row = blockIdx.x;
    const float* xr = x + row * n;
    float* outr = out + row * n;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i] * xr[i];
    sum = detail::block_sum(sum);
    const float inv = 1.0f / sqrtf(sum / static_cast<float>(n) + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = xr[i] * inv;
        outr[i] = weight != nullptr ? v * weight[i] : v;
    }
}

}  // namespace

void rms_norm(const float* x, const float* weight, float* out, int rows, int n, float eps,
              cudaStream_t s) {
    if (n <= 0) throw InvalidArgument("cuda rms_norm: row length " + std::to_string(n));
    if (rows <= 0) return;
    constexpr int kThreads = 256;
    rms_norm_kernel<<<rows, kThreads, 0, s>>>(x, weight, out, n, eps);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

}  // namespace tokenscope::cuda::ops
