// Phi-3 / Phi-3.5 (mini, medium): the Llama block with q, k and v in one matrix (attn_qkv,
// rows in that order) and gate and up in one (ffn_up, gate rows first: Hugging Face's
// gate_up_proj chunked in two), RoPE on halves (NeoX), a sliding window on every layer when
// the file gives one (Phi-3-mini-4k: 2047). LongRoPE (the 128k models' rope_factors_long /
// rope_factors_short with their attention factor) is not implemented: such files are refused
// by name rather than run with wrong positions.
#include "gguf/file.h"
#include "model/architecture.h"
#include "util/error.h"

namespace tokenscope::model {

void configure_phi3(const HyperparameterReader& keys, ModelConfig& config) {
    config.rope_style = RopeStyle::NeoX;
    config.activation = FfnActivation::SiLU;
    config.fused_gate_up = true;
    config.sliding_window = keys.optional("attention.sliding_window", 0);
    config.layer_uses_window.assign(static_cast<std::size_t>(config.layers),
                                    config.sliding_window > 0);
    for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
        if (keys.file().find_tensor(name)) {
            throw FormatError(
                keys.file().path() + ": tensor '" + name +
                "': Phi-3 LongRoPE scaling is not supported (the 4k-context models are)");
        }
    }
}

}  // namespace tokenscope::model
