#include "inspect/model_cost.h"

#include "gguf/file.h"

namespace tokenscope::inspect {

ModelCost model_cost(const gguf::File& file) {
    ModelCost cost;
    const bool tied = file.find_tensor("output.weight") == nullptr;
    for (const auto& t : file.tensors()) {
        cost.parameters += static_cast<std::uint64_t>(t.element_count);
        if (t.name == "token_embd.weight") {
            if (tied) {
                cost.decode_bytes_per_token += t.byte_size;
                cost.output_flops = 2.0 * static_cast<double>(t.element_count);
            } else if (t.dims.size() == 2) {
                cost.decode_bytes_per_token += t.byte_size / static_cast<std::uint64_t>(t.dims[1]);
            }
            continue;
        }
        cost.decode_bytes_per_token += t.byte_size;
        if (t.name == "output.weight") {
            cost.output_flops = 2.0 * static_cast<double>(t.element_count);
        } else if (t.dims.size() == 2) {
            cost.layer_flops_per_token += 2.0 * static_cast<double>(t.element_count);
        }
    }
    return cost;
}

}  // namespace tokenscope::inspect
