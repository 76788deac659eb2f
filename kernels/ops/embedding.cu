#include "ops/embedding.cuh"

#include <string>

#include "matmul/dequant_blocks.cuh"
#include "ops/check.h"
#include "tensor/type.h"

namespace tokenscope::cuda::ops {

namespace {

using tensor::Type;
namespace mm = tokenscope::cuda::detail;  // the per-type dequantizers shared with kernels/matmul

constexpr int kThreads = 256;

// grid (n, chunks of work): one thread per element (F32/F16/BF16) or per 32-element chunk
// (quantized formats, whose blocks are dequantized a chunk at a time).
template <Type T>
__global__ void embedding_kernel(const std::uint8_t* table, std::int64_t width, std::size_t row_bytes,
                                 const std::int32_t* tokens, float scale, float* out) {
    const std::int64_t i = blockIdx.x;
    const std::int64_t unit = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    const std::uint8_t* row = table + static_cast<std::size_t>(tokens[i]) * row_bytes;
    float* o = out + i * width;
    if constexpr (mm::kIsFloatType<T>) {
        if (unit < width) o[unit] = __fmul_rn(mm::load_float_weight<T>(row, unit), scale);
    } else {
        using Info = mm::QuantInfo<T>;
        if (unit >= width / mm::kChunk) return;
        float v[mm::kChunk];
        mm::dequant_chunk<T>(row + static_cast<std::size_t>(unit / Info::kChunks) * Info::kBytes,
                             static_cast<int>(unit % Info::kChunks), v);
#pragma unroll
        for (int k = 0; k < mm::kChunk; ++k) o[unit * mm::kChunk + k] = __fmul_rn(v[k], scale);
    }
}

template <Type T>
void launch(const void* table, std::int64_t width, const std::int32_t* tokens, int n, float scale, float* out,
            cudaStream_t s) {
    const std::int64_t units = mm::kIsFloatType<T> ? width : width / mm::kChunk;
    const std::int64_t chunks = (units + kThreads - 1) / kThreads;
    if (chunks > 65535) throw InvalidArgument("cuda embedding: width too large");
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(chunks));
    embedding_kernel<T><<<grid, kThreads, 0, s>>>(static_cast<const std::uint8_t*>(table), width,
                                                  tensor::row_bytes(T, width), tokens, scale, out);
    TOKENSCOPE_CUDA_CHECK_LAUNCH("embedding_kernel");
}

}  // namespace

void embedding(const void* table, tensor::Type type, std::int64_t width, const std::int32_t* tokens,
               int n, float scale, float* out, cudaStream_t s) {
    const tensor::TypeTraits& traits = tensor::traits(type);  // throws for an unknown id
    if (width <= 0 || width % traits.block_size != 0) {
        throw InvalidArgument("cuda embedding: width " + std::to_string(width) +
                              " is not a positive multiple of the block size " +
                              std::to_string(traits.block_size));
    }
    if (n <= 0) return;
    switch (type) {
        case Type::F32: return launch<Type::F32>(table, width, tokens, n, scale, out, s);
        case Type::F16: return launch<Type::F16>(table, width, tokens, n, scale, out, s);
        case Type::BF16: return launch<Type::BF16>(table, width, tokens, n, scale, out, s);
        case Type::Q4_0: return launch<Type::Q4_0>(table, width, tokens, n, scale, out, s);
        case Type::Q4_1: return launch<Type::Q4_1>(table, width, tokens, n, scale, out, s);
        case Type::Q5_0: return launch<Type::Q5_0>(table, width, tokens, n, scale, out, s);
        case Type::Q5_1: return launch<Type::Q5_1>(table, width, tokens, n, scale, out, s);
        case Type::Q8_0: return launch<Type::Q8_0>(table, width, tokens, n, scale, out, s);
        case Type::Q2_K: return launch<Type::Q2_K>(table, width, tokens, n, scale, out, s);
        case Type::Q3_K: return launch<Type::Q3_K>(table, width, tokens, n, scale, out, s);
        case Type::Q4_K: return launch<Type::Q4_K>(table, width, tokens, n, scale, out, s);
        case Type::Q5_K: return launch<Type::Q5_K>(table, width, tokens, n, scale, out, s);
        case Type::Q6_K: return launch<Type::Q6_K>(table, width, tokens, n, scale, out, s);
    }
    throw InvalidArgument("cuda embedding: unsupported tensor type id " +
                          std::to_string(static_cast<std::uint32_t>(type)));
}

}  // namespace tokenscope::cuda::ops
