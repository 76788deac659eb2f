// tensor::quantize_row_weighted: the importance-weighted quantizers behind one entry point.
#include <vector>

#include "tensor/row_kernels.h"
#include "tensor/type.h"
#include "util/error.h"

namespace tokenscope::tensor {

namespace {

using WeightedFn = void (*)(const float*, void*, std::int64_t, const float*);

WeightedFn weighted_fn(Type type) {
    switch (type) {
        case Type::Q4_0:
            return detail::quantize_row_q4_0_weighted;
        case Type::Q4_1:
            return detail::quantize_row_q4_1_weighted;
        case Type::Q5_0:
            return detail::quantize_row_q5_0_weighted;
        case Type::Q5_1:
            return detail::quantize_row_q5_1_weighted;
        case Type::Q2_K:
            return detail::quantize_row_q2_k_weighted;
        case Type::Q3_K:
            return detail::quantize_row_q3_k_weighted;
        case Type::Q4_K:
            return detail::quantize_row_q4_k_weighted;
        case Type::Q5_K:
            return detail::quantize_row_q5_k_weighted;
        case Type::Q6_K:
            return detail::quantize_row_q6_k_weighted;
        default:
            return nullptr;
    }
}

}  // namespace

bool uses_importance(Type type) {
    return weighted_fn(type) != nullptr;
}

void quantize_row_weighted(Type type, const float* in, void* blocks, std::int64_t n,
                           const float* importance) {
    const WeightedFn fn = weighted_fn(type);
    if (importance == nullptr || fn == nullptr) {
        quantize_row(type, in, blocks, n);
        return;
    }
    row_bytes(type, n);  // checks the row length
    if (n == 0) return;
    thread_local std::vector<float> weights;
    weights.resize(static_cast<std::size_t>(n));
    detail::importance_weights(in, importance, n, weights.data());
    fn(in, blocks, n, weights.data());
}

}  // namespace tokenscope::tensor
