#include "ops/embedding.cuh"

#include <string>

#include "ops/check.h"
#include "ops/dequant.cuh"

namespace tokenscope::cuda::ops {

namespace {

// grid (n, column chunks), one thread per output element.
__global__ void embedding_kernel(const std::uint8_t* table, tensor::Type type, std::int64_t width,
                                 std::int64_t row_bytes, const std::int32_t* tokens, float scale,
                                 float* out) {
    const std::int64_t i = blockIdx.x;
    const std::int64_t j = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    if (j >= width) return;
    const std::uint8_t* row = table + static_cast<std::int64_t>(tokens[i]) * row_bytes;
    out[i * width + j] = __fmul_rn(dq::dequant_element(row, type, j), scale);
}

}  // namespace

void embedding(const void* table, tensor::Type type, std::int64_t width, const std::int32_t* tokens,
               int n, float scale, float* out, cudaStream_t s) {
    const std::int64_t bs = dq::block_size(type);
    if (bs == 0) {
        throw InvalidArgument("cuda embedding: unsupported tensor type id " +
                              std::to_string(static_cast<std::uint32_t>(type)));
    }
    if (width <= 0 || width % bs != 0) {
        throw InvalidArgument("cuda embedding: width " + std::to_string(width) +
                              " is not a positive multiple of the block size " +
                              std::to_string(bs));
    }
    if (n <= 0) return;
    constexpr int kThreads = 256;
    const std::int64_t chunks = (width + kThreads - 1) / kThreads;
    if (chunks > 65535) throw InvalidArgument("cuda embedding: width too large");
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(chunks));
    embedding_kernel<<<grid, kThreads, 0, s>>>(static_cast<const std::uint8_t*>(table), type, width,
                                               dq::row_bytes(type, width), tokens, scale, out);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("embedding_kernel");
}

}  // namespace tokenscope::cuda::ops
