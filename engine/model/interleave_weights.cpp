#include "model/interleave_weights.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "gguf/file.h"
#include "tensor/interleaved_rows.h"
#include "util/error.h"

namespace tokenscope::model {

namespace {
bool qualifies(const WeightMatrix& w) {
    return w.data != nullptr && w.layout == tensor::RowLayout::Rows &&
           tensor::can_interleave(w.type, w.rows, w.cols) && tensor::interleaving_pays(w.type);
}

// Visits the matrices that are multiplied. An untied embedding is only read a row per token,
// so it keeps the file's order; a tied one is the output's bytes and follows the output.
template <class Weights, class Visit>
void for_each_multiplied_matrix(Weights& weights, Visit visit) {
    visit(weights.output);
    for (auto& l : weights.layers) {
        for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) visit(*w);
    }
}
}  // namespace

bool interleaving_applies(const ModelWeights& weights) {
    bool any = false;
    for_each_multiplied_matrix(weights, [&](const WeightMatrix& w) { any = any || qualifies(w); });
    return any;
}

InterleaveResult interleave_weights(gguf::File& file, ModelWeights& weights) {
    std::vector<WeightMatrix*> chosen;
    for_each_multiplied_matrix(weights, [&](WeightMatrix& w) {
        if (qualifies(w)) chosen.push_back(&w);
    });
    InterleaveResult result;
    if (chosen.empty()) return result;
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::uint8_t> rows;
    const bool edited = file.edit_copy([&](std::span<std::uint8_t> bytes) {
        for (WeightMatrix* w : chosen) {
            const auto* at = static_cast<const std::uint8_t*>(w->data);
            if (at < bytes.data() || at + w->bytes > bytes.data() + bytes.size()) {
                throw InvalidArgument(file.path() +
                                      ": a weight matrix lies outside the file's bytes");
            }
            std::uint8_t* target = bytes.data() + (at - bytes.data());
            // A group occupies the bytes of its own 16 rows, so each is rewritten in place
            // through a copy of those rows alone.
            const std::uint64_t group_bytes =
                w->bytes / static_cast<std::uint64_t>(w->rows) * tensor::kInterleavedGroupRows;
            for (std::uint64_t g = 0; g < w->bytes; g += group_bytes) {
                rows.assign(target + g, target + g + group_bytes);
                tensor::interleave_rows(w->type, rows.data(), tensor::kInterleavedGroupRows,
                                        w->cols, target + g);
            }
            result.matrices += 1;
            result.bytes += w->bytes;
        }
    });
    if (!edited) return InterleaveResult{};
    for (WeightMatrix* w : chosen) w->layout = tensor::RowLayout::Interleaved;
    if (weights.token_embedding.data == weights.output.data)
        weights.token_embedding.layout = weights.output.layout;
    result.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
}

}  // namespace tokenscope::model
