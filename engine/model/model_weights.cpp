#include "model/model_weights.h"

#include <string>

#include "gguf/file.h"
#include "util/error.h"

namespace tokenscope::model {

namespace {

class Binder {
public:
    Binder(const gguf::File& file) : file_(file) {}

    const gguf::TensorInfo* find(const std::string& name, bool required) {
        const gguf::TensorInfo* info = file_.find_tensor(name);
        if (!info && required) missing_.push_back(name);
        return info;
    }

    WeightMatrix matrix(const std::string& name, std::int64_t rows, std::int64_t cols, bool required = true) {
        WeightMatrix m;
        const gguf::TensorInfo* info = find(name, required);
        if (!info) return m;
        const std::int64_t file_rows = info->dims.size() > 1 ? info->dims[1] : 1;
        if (info->dims.size() > 2 || info->dims[0] != cols || file_rows != rows) {
            throw FormatError(file_.path() + ": tensor '" + name + "': shape " + info->shape_string() +
                              ", expected " + std::to_string(cols) + " x " + std::to_string(rows));
        }
        m.type = info->type;
        m.rows = rows;
        m.cols = cols;
        m.data = info->data;
        m.bytes = info->byte_size;
        return m;
    }

    std::vector<float> vector(const std::string& name, std::int64_t length, bool required = true) {
        const gguf::TensorInfo* info = find(name, required);
        if (!info) return {};
        if (info->element_count != length) {
            throw FormatError(file_.path() + ": tensor '" + name + "': " + std::to_string(info->element_count) +
                              " elements, expected " + std::to_string(length));
        }
        std::vector<float> out(static_cast<std::size_t>(length));
        tensor::dequantize_row(info->type, info->data, out.data(), length);
        return out;
    }

    void finish() const {
        if (missing_.empty()) return;
        std::string list;
        for (std::size_t i = 0; i < missing_.size() && i < 12; ++i) list += (i ? ", " : "") + missing_[i];
        if (missing_.size() > 12) list += ", ... (" + std::to_string(missing_.size()) + " in all)";
        throw FormatError(file_.path() + ": missing tensors: " + list);
    }

private:
    const gguf::File& file_;
    std::vector<std::string> missing_;
};

// Rows [first, first + count) of a bound matrix, in place: fused tensors (Phi-3's attn_qkv and
// gate+up) become the separate matrices the backends multiply with, without a copy.
WeightMatrix row_slice(const WeightMatrix& m, std::int64_t first, std::int64_t count) {
    if (!m.data) return m;  // missing: already reported by the binder
    const std::uint64_t row_bytes = m.bytes / static_cast<std::uint64_t>(m.rows);
    WeightMatrix s = m;
    s.rows = count;
    s.data = m.row(first);
    s.bytes = row_bytes * static_cast<std::uint64_t>(count);
    return s;
}

}  // namespace

ModelWeights bind_weights(const gguf::File& file, ModelConfig& config) {
    Binder bind(file);
    ModelWeights w;
    w.total_bytes = file.tensor_bytes();
    const gguf::TensorInfo* embd = bind.find("token_embd.weight", true);
    if (embd) {
        if (embd->dims.size() != 2 || embd->dims[0] != config.embedding_length) {
            throw FormatError(file.path() + ": tensor 'token_embd.weight': shape " + embd->shape_string() +
                              ", expected " + std::to_string(config.embedding_length) + " x vocabulary");
        }
        if (config.vocab_size == 0) config.vocab_size = embd->dims[1];
        w.token_embedding = bind.matrix("token_embd.weight", config.vocab_size, config.embedding_length);
    }
    const std::int64_t width = config.embedding_length;
    w.output_norm = bind.vector("output_norm.weight", width);
    if (file.find_tensor("output.weight")) {
        config.tied_output = false;
        w.output = bind.matrix("output.weight", config.vocab_size, width);
    } else {
        config.tied_output = true;
        w.output = w.token_embedding;
    }
    w.layers.resize(static_cast<std::size_t>(config.layers));
    for (std::int64_t l = 0; l < config.layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
        L.attn_norm = bind.vector(p + "attn_norm.weight", width);
        if (file.find_tensor(p + "attn_qkv.weight")) {
            // Fused q, k, v rows in that order (Phi-3; llama.cpp accepts it for any architecture).
            const WeightMatrix qkv =
                bind.matrix(p + "attn_qkv.weight", config.q_dim() + config.kv_dim() + config.v_dim(), width);
            L.wq = row_slice(qkv, 0, config.q_dim());
            L.wk = row_slice(qkv, config.q_dim(), config.kv_dim());
            L.wv = row_slice(qkv, config.q_dim() + config.kv_dim(), config.v_dim());
        } else {
            L.wq = bind.matrix(p + "attn_q.weight", config.q_dim(), width);
            L.wk = bind.matrix(p + "attn_k.weight", config.kv_dim(), width);
            L.wv = bind.matrix(p + "attn_v.weight", config.v_dim(), width);
        }
        L.wo = bind.matrix(p + "attn_output.weight", width, config.heads * config.value_dim);
        if (config.attention_bias) {
            L.bq = bind.vector(p + "attn_q.bias", config.q_dim());
            L.bk = bind.vector(p + "attn_k.bias", config.kv_dim());
            L.bv = bind.vector(p + "attn_v.bias", config.v_dim());
        }
        if (config.qk_norm) {
            L.q_norm = bind.vector(p + "attn_q_norm.weight", config.head_dim);
            L.k_norm = bind.vector(p + "attn_k_norm.weight", config.head_dim);
        }
        if (config.post_norms) {
            L.post_attn_norm = bind.vector(p + "post_attention_norm.weight", width);
            L.post_ffn_norm = bind.vector(p + "post_ffw_norm.weight", width);
        }
        L.ffn_norm = bind.vector(p + "ffn_norm.weight", width);
        if (config.fused_gate_up) {
            const WeightMatrix gate_up = bind.matrix(p + "ffn_up.weight", 2 * config.ffn_length, width);
            L.w_gate = row_slice(gate_up, 0, config.ffn_length);
            L.w_up = row_slice(gate_up, config.ffn_length, config.ffn_length);
        } else {
            L.w_gate = bind.matrix(p + "ffn_gate.weight", config.ffn_length, width);
            L.w_up = bind.matrix(p + "ffn_up.weight", config.ffn_length, width);
        }
        L.w_down = bind.matrix(p + "ffn_down.weight", width, config.ffn_length);
    }
    // Optional for every architecture, as in llama.cpp: only files converted from a model with
    // llama3 rope scaling carry it.
    w.rope_freq_factors = bind.vector("rope_freqs.weight", config.rope_dims / 2, /*required=*/false);
    bind.finish();
    if (config.norm_weight_offset != 0.0f) {
        auto shift = [&](std::vector<float>& v) {
            for (float& x : v) x += config.norm_weight_offset;
        };
        shift(w.output_norm);
        for (auto& L : w.layers) {
            for (auto* v : {&L.attn_norm, &L.q_norm, &L.k_norm, &L.post_attn_norm, &L.ffn_norm, &L.post_ffn_norm}) shift(*v);
        }
    }
    return w;
}

}  // namespace tokenscope::model
