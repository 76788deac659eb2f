#pragma once
// What one token costs a model, from its tensor list: the bytes decode streams (every layer
// matrix and the output projection; one embedding row when the output matrix is separate)
// and the FLOPs prefill computes, in its matrices and in attention. Shared by `tokenscope-cli
// bench` and the GUI's metrics.
#include <cstdint>

namespace tokenscope::gguf {
class File;
}
namespace tokenscope::model {
struct ModelConfig;
}

namespace tokenscope::inspect {

struct ModelCost {
    std::uint64_t decode_bytes_per_token = 0;
    double layer_flops_per_token = 0;  // 2 x parameters of the layer matrices
    double output_flops = 0;           // 2 x vocab x width, once per sampled position
    // The parts of the two above whose products multiply int8 at the active SIMD level
    // (tensor::prefill_uses_int8_products: the quantized types); the rest are f32 FMAs.
    double layer_int8_flops_per_token = 0;
    double output_int8_flops = 0;
    std::uint64_t parameters = 0;      // every tensor's element count
};

ModelCost model_cost(const gguf::File& file);

// Floating-point operations (2 per multiply-add) of causal attention for `tokens` queries that
// follow `cached` tokens already in the cache, over every layer and query head: each query's
// scores against the keys it sees (its own position and those before it, at most the sliding
// window on the layers that use one) and the weighted sum of those keys' values. Softmax, RoPE
// and the projections are not counted (the projections are layer_flops_per_token). Unlike the
// matrix products, this grows with the context: a 512-token prompt does four times the
// attention per token of a 128-token one, in f32 on the CPU (the bench reports its share).
double attention_flops(const model::ModelConfig& config, std::int64_t cached, std::int64_t tokens);

}  // namespace tokenscope::inspect
