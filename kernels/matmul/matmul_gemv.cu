// Fused dequantize + GEMV for small token counts (decode): one warp per output row. Each lane
// walks the row in 32-element chunks (lane, lane + 32, ...), dequantizes a chunk into registers
// and accumulates its dot product with every token's activations in f32; the warp then adds its
// 32 partial sums with __shfl_down_sync and lane 0 writes y[t*rows + r].
#include <string>

#include "matmul/dequant_blocks.cuh"
#include "matmul/matmul.cuh"
#include "matmul/matmul_internal.h"

namespace tokenscope::cuda::detail {

namespace {

constexpr int kGemvWarps = 4;  // rows per thread block
constexpr int kGemvThreads = 32 * kGemvWarps;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;  // the full sum in lane 0
}

template <tensor::Type T>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_kernel(const std::uint8_t* __restrict__ W, std::size_t row_bytes, std::int64_t rows,
                std::int64_t cols, const float* __restrict__ x, int tokens, float* __restrict__ y) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const std::int64_t r =
        static_cast<std::int64_t>(blockIdx.x) * kGemvWarps + static_cast<std::int64_t>(threadIdx.x / 32);
    // The same for all 32 lanes of a warp, so a warp either returns whole or takes part whole in
    // the shuffles below.
    if (r >= rows) return;
    const std::uint8_t* row = W + static_cast<std::size_t>(r) * row_bytes;

    float acc[kGemvMaxTokens];
#pragma unroll
    for (int t = 0; t < kGemvMaxTokens; ++t) acc[t] = 0.0f;

    if constexpr (kIsFloatType<T>) {
        for (std::int64_t c = lane; c < cols; c += 32) {
            const float w = load_float_weight<T>(row, c);
#pragma unroll
            for (int t = 0; t < kGemvMaxTokens; ++t) {
                if (t < tokens) acc[t] = fmaf(w, x[t * cols + c], acc[t]);
            }
        }
    } else {
        using Info = QuantInfo<T>;
        const std::int64_t chunks = cols / kChunk;
        for (std::int64_t c = lane; c < chunks; c += 32) {
            float w[kChunk];
            dequant_chunk<T>(row + static_cast<std::size_t>(c / Info::kChunks) * Info::kBytes,
                             static_cast<int>(c % Info::kChunks), w);
            const float* xc = x + c * kChunk;
#pragma unroll
            for (int t = 0; t < kGemvMaxTokens; ++t) {
                if (t < tokens) {
                    const float* xt = xc + t * cols;
                    float sum = 0.0f;
#pragma unroll
                    for (int i = 0; i < kChunk; ++i) sum = fmaf(w[i], xt[i], sum);
                    acc[t] += sum;
                }
            }
        }
    }

#pragma unroll
    for (int t = 0; t < kGemvMaxTokens; ++t) {
        if (t < tokens) {  // uniform across the warp
            const float v = warp_sum(acc[t]);
            if (lane == 0) y[t * rows + r] = v;
        }
    }
}

template <tensor::Type T>
void launch(const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows, std::int64_t cols,
            const float* x, int tokens, float* y, cudaStream_t s) {
    const std::int64_t blocks = (rows + kGemvWarps - 1) / kGemvWarps;
    gemv_kernel<T><<<static_cast<unsigned>(blocks), kGemvThreads, 0, s>>>(W, row_bytes, rows, cols,
                                                                          x, tokens, y);
    check_cuda(cudaGetLastError(), std::string("matmul: GEMV kernel launch for ") +
                                       tensor::type_name(T));
}

}  // namespace

void launch_gemv(tensor::Type type, const std::uint8_t* W, std::size_t row_bytes, std::int64_t rows,
                 std::int64_t cols, const float* x, int tokens, float* y, cudaStream_t s) {
    using tensor::Type;
    switch (type) {
        case Type::F32: return launch<Type::F32>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::F16: return launch<Type::F16>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::BF16: return launch<Type::BF16>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q4_0: return launch<Type::Q4_0>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q4_1: return launch<Type::Q4_1>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q5_0: return launch<Type::Q5_0>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q5_1: return launch<Type::Q5_1>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q8_0: return launch<Type::Q8_0>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q2_K: return launch<Type::Q2_K>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q3_K: return launch<Type::Q3_K>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q4_K: return launch<Type::Q4_K>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q5_K: return launch<Type::Q5_K>(W, row_bytes, rows, cols, x, tokens, y, s);
        case Type::Q6_K: return launch<Type::Q6_K>(W, row_bytes, rows, cols, x, tokens, y, s);
    }
    throw InvalidArgument("matmul: no GEMV kernel for tensor type id " +
                          std::to_string(static_cast<std::uint32_t>(type)));
}

}  // namespace tokenscope::cuda::detail
