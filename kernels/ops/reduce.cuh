#pragma once
// Warp and block reductions for the kernels in kernels/ops (device code, .cu files only).
// Block reductions require blockDim.x to be a multiple of 32 and at most 1024, and every thread
// of the block to call them (they contain __syncthreads). The result is returned to all threads.

namespace tokenscope::cuda::ops::detail {

inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}

__device__ inline float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    return v;
}

__device__ inline float block_sum(float v) {
    __shared__ float partial[32];
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int warps = static_cast<int>(blockDim.x) / 32;
    v = warp_sum(v);
    __syncthreads();  // partial[] may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += partial[w];
    return total;
}

__device__ inline float block_max(float v) {
    __shared__ float partial[32];
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int warps = static_cast<int>(blockDim.x) / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float result = partial[0];
    for (int w = 1; w < warps; ++w) result = fmaxf(result, partial[w]);
    return result;
}

}  // namespace tokenscope::cuda::ops::detail
