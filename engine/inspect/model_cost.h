#pragma once
// What one token costs a model, from its tensor list: the bytes decode streams (every layer
// matrix and the output projection; one embedding row when the output matrix is separate)
// and the FLOPs prefill computes. Shared by `tokenscope-cli bench` and the GUI's metrics.
#include <cstdint>

namespace tokenscope::gguf {
class File;
}

namespace tokenscope::inspect {

struct ModelCost {
    std::uint64_t decode_bytes_per_token = 0;
    double layer_flops_per_token = 0;  // 2 x parameters of the layer matrices
    double output_flops = 0;           // 2 x vocab x width, once per sampled position
    std::uint64_t parameters = 0;      // every tensor's element count
};

ModelCost model_cost(const gguf::File& file);

}  // namespace tokenscope::inspect
