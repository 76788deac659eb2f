#include "inspect/model_cost.h"

#include "gguf/file.h"
#include "model/model_config.h"
#include "tensor/matmul.h"

namespace tokenscope::inspect {

ModelCost model_cost(const gguf::File& file) {
    ModelCost cost;
    const bool tied = file.find_tensor("output.weight") == nullptr;
    auto count_output = [&](const gguf::TensorInfo& t) {
        cost.output_flops = 2.0 * static_cast<double>(t.element_count);
        cost.output_int8_flops = tensor::prefill_uses_int8_products(t.type) ? cost.output_flops : 0;
    };
    for (const auto& t : file.tensors()) {
        cost.parameters += static_cast<std::uint64_t>(t.element_count);
        if (t.name == "token_embd.weight") {
            if (tied) {
                cost.decode_bytes_per_token += t.byte_size;
                count_output(t);
            } else if (t.dims.size() == 2) {
                cost.decode_bytes_per_token += t.byte_size / static_cast<std::uint64_t>(t.dims[1]);
            }
            continue;
        }
        cost.decode_bytes_per_token += t.byte_size;
        if (t.name == "output.weight") {
            count_output(t);
        } else if (t.dims.size() == 2) {
            const double flops = 2.0 * static_cast<double>(t.element_count);
            cost.layer_flops_per_token += flops;
            if (tensor::prefill_uses_int8_products(t.type))
                cost.layer_int8_flops_per_token += flops;
        }
    }
    return cost;
}

double attention_flops(const model::ModelConfig& config, std::int64_t cached, std::int64_t tokens) {
    if (tokens <= 0) return 0.0;
    // Query p (0-based position) sees p + 1 keys, at most `window` of them. Over the queries
    // these counts run a = cached + 1 .. b = cached + tokens: an arithmetic series up to the
    // window, then `window` each.
    const double a = static_cast<double>(cached) + 1.0;
    const double b = static_cast<double>(cached + tokens);
    auto series = [](double from, double to) { return (from + to) * (to - from + 1.0) / 2.0; };
    double keys_all = 0.0;  // key visits of all layers' queries, one head each
    for (std::int64_t layer = 0; layer < config.layers; ++layer) {
        const double w = static_cast<double>(config.sliding_window);
        if (!config.uses_window(layer) || b <= w) {
            keys_all += series(a, b);
        } else if (a > w) {
            keys_all += w * static_cast<double>(tokens);
        } else {
            keys_all += series(a, w) + w * (b - w);
        }
    }
    // Per key and query head: a score (head_dim multiply-adds) and its share of the weighted
    // sum (value_dim multiply-adds).
    return keys_all * static_cast<double>(config.heads) * 2.0 *
           static_cast<double>(config.head_dim + config.value_dim);
}

}  // namespace tokenscope::inspect
