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
}  // namespace

InterleaveResult interleave_weights(gguf::File& file, ModelWeights& weights) {
    std::vector<WeightMatrix*> matrices{&weights.token_embedding, &weights.output};
    for (LayerWeights& l : weights.layers) {
        for (WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
            matrices.push_back(w);
    }
    std::vector<WeightMatrix*> chosen;
    for (WeightMatrix* w : matrices) {
        if (!qualifies(*w)) continue;
        bool seen = false;  // a tied output is the embedding's bytes
        for (const WeightMatrix* c : chosen) seen = seen || c->data == w->data;
        if (!seen) chosen.push_back(w);
    }
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
            const std::uint64_t group_bytes = w->bytes / static_cast<std::uint64_t>(w->rows) *
                                              tensor::kInterleavedGroupRows;
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
    for (WeightMatrix* w : matrices) {
        for (const WeightMatrix* c : chosen) {
            if (w->data == c->data) w->layout = tensor::RowLayout::Interleaved;
        }
    }
    result.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
}

}  // namespace tokenscope::model
