// Int8 GEMV for Q4_K weights (see matmul.cuh, matmul_gemv_int8.cu): one warp per output row, the
// vectorised GEMV's lane layout (8 lanes per 144-byte super-block, one 16-byte load of nibbles
// each: elements off..off+15 of sub-blocks 2g (low nibbles) and 2g+1 (high nibbles), with
// g = part / 2 and off = 16 * (part % 2)). The nibbles are masked out four at a time
// ((v >> 4) & 0x0F0F0F0F) and multiplied with the activation's int8 values by __dp4a; the
// min term needs the sum of the activation over the same 16 elements, also a __dp4a (with
// 0x01010101). Per lane and super-block: 16 integer instructions where the float kernel
// converts and multiplies 32 values.
//   sum over the lane's elements = dx_lo * (d sc_lo * dot_lo - dmin m_lo * sum_lo)
//                                + dx_hi * (d sc_hi * dot_hi - dmin m_hi * sum_hi)
// with dx the activation block scales (one per 32 elements = one per sub-block).
#include "matmul/dequant_blocks.cuh"
#include "matmul/gemv_int8_lanes.h"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda::detail {

namespace {

constexpr int kWarps = 4;

__global__ void __launch_bounds__(32 * kWarps)
    gemv_int8_q4_k_kernel(const std::uint8_t* __restrict__ W, std::size_t row_bytes, std::int64_t rows,
                          std::int64_t cols, const std::int8_t* __restrict__ xq, const float* __restrict__ xd,
                          float* __restrict__ y) {
    constexpr int kBlockBytes = sizeof(tensor::BlockQ4_K);  // 144 = 9 x 16
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int8::Q4KLane layout = int8::q4_k_lane(lane % int8::kQ4_KLanesPerBlock);
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (r >= rows) return;  // uniform across the warp
    const std::uint8_t* row = W + static_cast<std::size_t>(r) * row_bytes;
    const std::int64_t blocks = cols / 256;
    float acc = 0.0f;
    for (std::int64_t b = lane / int8::kQ4_KLanesPerBlock; b < blocks; b += 32 / int8::kQ4_KLanesPerBlock) {
        const auto* block = reinterpret_cast<const tensor::BlockQ4_K*>(row + b * kBlockBytes);
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(block->qs + layout.qs_byte()));
        const std::int64_t first = b * 256 + layout.first();  // 16-aligned: one 16-byte load each
        const int4 xl = *reinterpret_cast<const int4*>(xq + first);
        const int4 xh = *reinterpret_cast<const int4*>(xq + first + 32);
        const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
        const int lo_x[4] = {xl.x, xl.y, xl.z, xl.w};
        const int hi_x[4] = {xh.x, xh.y, xh.z, xh.w};
        int sc_lo = 0, m_lo = 0, sc_hi = 0, m_hi = 0;
        scale_min_k4_dev(2 * layout.group, block->scales, sc_lo, m_lo);
        scale_min_k4_dev(2 * layout.group + 1, block->scales, sc_hi, m_hi);
        acc += int8::q4_k_lane_sum(w, lo_x, hi_x, load_f16_dev(block->d), load_f16_dev(block->dmin), sc_lo, m_lo, sc_hi,
                                   m_hi, xd[b * 8 + 2 * layout.group], xd[b * 8 + 2 * layout.group + 1]);
    }
#pragma unroll
    for (int offset_ = 16; offset_ > 0; offset_ /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset_);
    if (lane == 0) y[r] = acc;
}

}  // namespace

void launch_gemv_int8_q4_k(const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
                           const std::int8_t* q, const float* d, float* y, cudaStream_t s) {
    gemv_int8_q4_k_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(W, row_bytes, rows,
                                                                                                     cols, q, d, y);
    check_cuda(cudaGetLastError(), "matmul: int8 GEMV launch for Q4_K");
}

}  // namespace tokenscope::cuda::detail
