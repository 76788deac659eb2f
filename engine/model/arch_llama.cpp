// Llama 1/2/3, TinyLlama, Mistral: pre-norm blocks, grouped-query attention, RoPE on adjacent
// pairs (the GGUF converter permutes q/k so this holds), SwiGLU, optional sliding window
// (Mistral v0.1) on every layer, tied or separate output matrix.
#include "gguf/file.h"
#include "model/architecture.h"

namespace tokenscope::model {

void configure_llama(const HyperparameterReader& keys, ModelConfig& config) {
    config.rope_style = RopeStyle::Normal;
    config.activation = FfnActivation::SiLU;
    config.sliding_window = keys.optional("attention.sliding_window", 0);
    config.layer_uses_window.assign(static_cast<std::size_t>(config.layers), config.sliding_window > 0);
    // tied_output is decided when binding tensors (output.weight may be absent).
}

}  // namespace tokenscope::model
