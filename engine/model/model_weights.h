#pragma once
// The model's tensors bound by name: matrices stay in their file format inside the mapping
// or the engine's copy of it (never dequantized wholesale; the engine may store some
// interleaved, model/interleave_weights.h); small vectors (norm weights) are converted to f32
// once at load.
#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "tensor/interleaved_rows.h"
#include "tensor/type.h"

namespace tokenscope::gguf {
class File;
}

namespace tokenscope::model {

// rows x cols, row-major, each row `cols` elements of `type` (GGUF ne0 = cols, ne1 = rows).
struct WeightMatrix {
    tensor::Type type = tensor::Type::F32;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    const void* data = nullptr;
    std::uint64_t bytes = 0;
    // Rows (the file's order) unless the engine stored the matrix interleaved for the CPU
    // kernels (interleave_weights.h); row() then does not point at a row.
    tensor::RowLayout layout = tensor::RowLayout::Rows;

    const std::uint8_t* row(std::int64_t r) const {
        return static_cast<const std::uint8_t*>(data) + static_cast<std::uint64_t>(r) * (bytes / static_cast<std::uint64_t>(rows));
    }
};

struct LayerWeights {
    std::vector<float> attn_norm;
    WeightMatrix wq, wk, wv, wo;
    std::vector<float> bq, bk, bv;               // attention_bias only (q_dim, kv_dim, v_dim)
    std::vector<float> q_norm, k_norm;           // qk_norm only (head_dim each)
    std::vector<float> post_attn_norm;           // post_norms only
    std::vector<float> ffn_norm;
    WeightMatrix w_gate, w_up, w_down;
    std::vector<float> post_ffn_norm;            // post_norms only
};

struct ModelWeights {
    WeightMatrix token_embedding;  // vocab x width
    WeightMatrix output;           // vocab x width (the embedding when tied)
    std::vector<float> output_norm;
    std::vector<LayerWeights> layers;
    // Llama 3.x: rope_freqs.weight, rope_dims / 2 factors that divide RoPE's inverse
    // frequencies (llama.cpp's converter bakes the llama3 rope scaling into this tensor).
    // Empty when the file has none.
    std::vector<float> rope_freq_factors;

    std::uint64_t total_bytes = 0;  // every tensor of the file
};

// Binds every tensor the configuration needs. Throws FormatError listing every missing tensor
// (not just the first), or naming a tensor whose shape or type does not fit.
ModelWeights bind_weights(const gguf::File& file, ModelConfig& config);

}  // namespace tokenscope::model
