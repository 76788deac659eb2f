// Int8 GEMV for Q8_0 weights (see matmul.cuh, matmul_gemv_int8.cu): one warp per output row, the
// vectorised GEMV's lane layout (4 lanes per 34-byte block, 8 quants each, 8 blocks per warp
// step), but the 8 weight bytes are assembled into two 32-bit words (the block's quants are only
// 2-byte aligned: four 2-byte loads) and multiplied with the activation's int8 values by two
// __dp4a, exact in int32; one float multiply-add per block with the two scales.
#include "matmul/dequant_blocks.cuh"
#include "matmul/gemv_int8_lanes.h"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda::detail {

namespace {

constexpr int kWarps = 4;

__global__ void __launch_bounds__(32 * kWarps)
    gemv_int8_q8_0_kernel(const std::uint8_t* __restrict__ W, std::size_t row_bytes, std::int64_t rows,
                          std::int64_t cols, const std::int8_t* __restrict__ xq, const float* __restrict__ xd,
                          float* __restrict__ y) {
    constexpr int kBlockBytes = sizeof(tensor::BlockQ8_0);  // 34
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int part = lane % int8::kQ8_0LanesPerBlock;
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (r >= rows) return;  // uniform across the warp
    const std::uint8_t* row = W + static_cast<std::size_t>(r) * row_bytes;
    const std::int64_t blocks = cols / 32;
    float acc = 0.0f;
    for (std::int64_t b = lane / int8::kQ8_0LanesPerBlock; b < blocks; b += 32 / int8::kQ8_0LanesPerBlock) {
        const std::uint8_t* block = row + b * kBlockBytes;
        const float d = __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(block))));
        const auto* q16 = reinterpret_cast<const unsigned short*>(block + 2 + 8 * part);
        const int w0 = static_cast<int>(static_cast<unsigned>(__ldg(q16)) | (static_cast<unsigned>(__ldg(q16 + 1)) << 16));
        const int w1 = static_cast<int>(static_cast<unsigned>(__ldg(q16 + 2)) | (static_cast<unsigned>(__ldg(q16 + 3)) << 16));
        const int2 xv = *reinterpret_cast<const int2*>(xq + b * 32 + 8 * part);
        acc += int8::q8_0_lane(d, xd[b], w0, w1, xv.x, xv.y);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    if (lane == 0) y[r] = acc;
}

}  // namespace

void launch_gemv_int8_q8_0(const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
                           const std::int8_t* q, const float* d, float* y, cudaStream_t s) {
    gemv_int8_q8_0_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(W, row_bytes, rows,
                                                                                                     cols, q, d, y);
    check_cuda(cudaGetLastError(), "matmul: int8 GEMV launch for Q8_0");
}

}  // namespace tokenscope::cuda::detail
