// Qwen 2 / 2.5 (and the DeepSeek-R1 Qwen distills): the Llama block with a bias on the q, k
// and v projections, RoPE on halves (NeoX: the converter does not permute q/k for Qwen), no
// sliding window in practice (llama.cpp ignores Qwen's use_sliding_window, and so do we),
// tied or separate output matrix.
#include "gguf/file.h"
#include "model/architecture.h"

namespace tokenscope::model {

void configure_qwen2(const HyperparameterReader& /*keys*/, ModelConfig& config) {
    config.rope_style = RopeStyle::NeoX;
    config.activation = FfnActivation::SiLU;
    config.attention_bias = true;
}

}  // namespace tokenscope::model
