#pragma once
// Token embedding lookup on the GPU. Host launcher only; include from C++ or CUDA.
#include <cstdint>

#include "ops/stream.h"

namespace tokenscope::tensor {
enum class Type : std::uint32_t;
}

namespace tokenscope::cuda::ops {

// out[i * width + j] = dequant(table row tokens[i])[j] * scale, for i < n, j < width.
// table: the embedding tensor as stored in the GGUF file (any tensor::Type), rows of `width`
// elements; tokens: n device ints, each a valid row of the table (not checked on the device);
// out: n * width floats. Throws tokenscope::InvalidArgument for an unsupported type or a width
// that is not a whole number of blocks, tokenscope::Error when the launch fails.
void embedding(const void* table, tensor::Type type, std::int64_t width, const std::int32_t* tokens,
               int n, float scale, float* out, cudaStream_t s);

}  // namespace tokenscope::cuda::ops
