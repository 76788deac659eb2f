#pragma once
// Hyperparameters of a transformer, read from GGUF keys. One transformer implementation is
// parameterised by these flags; what differs per architecture is only how they are read
// (model/arch_<name>.cpp).
#include <cstdint>
#include <string>
#include <vector>

namespace tokenscope::gguf {
class File;
}

namespace tokenscope::model {

enum class RopeStyle {
    Normal,  // rotate adjacent pairs (x[2i], x[2i+1]) — llama.cpp's LLAMA_ROPE_TYPE_NORM
    NeoX,    // rotate halves (x[i], x[i + d/2]) — GPT-NeoX, Gemma
};

enum class FfnActivation {
    SiLU,      // SwiGLU: silu(gate) * up
    GeluTanh,  // GeGLU with the tanh approximation of GELU
};

struct ModelConfig {
    std::string architecture;  // GGUF general.architecture
    std::string name;          // general.name (for display)
    std::int64_t vocab_size = 0;
    std::int64_t embedding_length = 0;  // model width
    std::int64_t layers = 0;
    std::int64_t heads = 0;
    std::int64_t kv_heads = 0;
    std::int64_t head_dim = 0;  // key length per head
    std::int64_t value_dim = 0; // value length per head
    std::int64_t ffn_length = 0;
    std::int64_t context_length = 0;
    float norm_eps = 1e-5f;

    RopeStyle rope_style = RopeStyle::Normal;
    std::int64_t rope_dims = 0;         // leading dims of each head that are rotated
    float rope_freq_base = 10000.0f;    // global (full-attention) layers
    float rope_freq_base_local = 10000.0f;  // sliding-window layers (Gemma 3: 10 000)
    float rope_linear_scale = 1.0f;     // positions are divided by this (linear scaling)

    // Sliding-window attention: a query at position p sees keys at positions > p - window.
    // 0 means no window. layer_uses_window[l] says which layers are local.
    std::int64_t sliding_window = 0;
    std::vector<bool> layer_uses_window;

    float embedding_scale = 1.0f;  // Gemma: sqrt(embedding_length)
    float attention_scale = 0.0f;  // multiplies q·k; 1/sqrt(head_dim) unless the arch says otherwise
    bool qk_norm = false;          // RMSNorm over each head of q and k (Gemma 3, Qwen 3)
    bool attention_bias = false;   // q, k and v projections add a bias (Qwen 2)
    bool fused_gate_up = false;    // ffn_up.weight holds gate (first half) and up rows (Phi-3)
    bool post_norms = false;       // RMSNorm after attention and after the FFN (Gemma 2/3)
    // Gemma's RMSNorm multiplies by (1 + w). llama.cpp's converter stores 1 + w in the GGUF,
    // so for GGUF files this stays 0; the flag exists for weights stored unshifted.
    float norm_weight_offset = 0.0f;
    FfnActivation activation = FfnActivation::SiLU;
    bool tied_output = false;      // no output.weight: logits use token_embd.weight

    std::int64_t q_dim() const { return heads * head_dim; }
    std::int64_t kv_dim() const { return kv_heads * head_dim; }
    std::int64_t v_dim() const { return kv_heads * value_dim; }
    bool uses_window(std::int64_t layer) const {
        return sliding_window > 0 && layer_uses_window.at(static_cast<std::size_t>(layer));
    }
    float rope_base(std::int64_t layer) const {
        return uses_window(layer) ? rope_freq_base_local : rope_freq_base;
    }
};

// Reads the configuration for the file's architecture. Throws FormatError naming the file and
// key for missing or inconsistent hyperparameters, and for an unsupported architecture
// (listing the supported ones).
ModelConfig load_model_config(const gguf::File& file);

}  // namespace tokenscope::model
