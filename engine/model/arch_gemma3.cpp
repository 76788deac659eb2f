// Gemma 3 (text): embeddings scaled by sqrt(width), RMSNorm before and after attention and
// the FFN, RMSNorm over each head of q and k, GeGLU (tanh GELU), RoPE on halves (NeoX), five
// sliding-window layers then one global layer, repeating; local layers use RoPE base 10 000,
// global ones the file's rope.freq_base. Output tied to the embedding.
#include <cmath>

#include "gguf/file.h"
#include "model/architecture.h"

namespace tokenscope::model {

namespace {
// Gemma 3 interleaves 5 local layers with 1 global one: layer l is global when
// (l + 1) % 6 == 0 (the published architecture; GGUF carries no key for the pattern).
constexpr std::int64_t kGlobalEvery = 6;
constexpr float kLocalRopeBase = 10000.0f;
}  // namespace

void configure_gemma3(const HyperparameterReader& keys, ModelConfig& config) {
    config.rope_style = RopeStyle::NeoX;
    config.activation = FfnActivation::GeluTanh;
    config.embedding_scale = std::sqrt(static_cast<float>(config.embedding_length));
    config.qk_norm = true;
    config.post_norms = true;
    config.tied_output = true;
    config.norm_eps = keys.optional_float("attention.layer_norm_rms_epsilon", 1e-6f);
    config.sliding_window = keys.optional("attention.sliding_window", 0);
    for (std::int64_t l = 0; l < config.layers; ++l) {
        config.layer_uses_window[static_cast<std::size_t>(l)] =
            config.sliding_window > 0 && (l + 1) % kGlobalEvery != 0;
    }
    config.rope_freq_base_local = kLocalRopeBase;
    // query_pre_attn_scalar: Gemma 3 scales q by 1/sqrt(query_pre_attn_scalar), which equals
    // the head size for the released text models (270M: 256).
    const float query_pre_attn_scalar = keys.optional_float(
        "attention.query_pre_attn_scalar", static_cast<float>(config.head_dim));
    config.attention_scale = 1.0f / std::sqrt(query_pre_attn_scalar);
}

}  // namespace tokenscope::model
