// Qwen 3 (dense): the Llama block without biases, plus an RMSNorm over each head of q and k
// (attn_q_norm / attn_k_norm, head_dim weights, the block's epsilon) before RoPE, which
// rotates halves (NeoX). The head size comes from attention.key_length and may differ from
// width / heads (Qwen3-0.6B: 1024 wide, 16 heads of 128).
#include "gguf/file.h"
#include "model/architecture.h"

namespace tokenscope::model {

void configure_qwen3(const HyperparameterReader& /*keys*/, ModelConfig& config) {
    config.rope_style = RopeStyle::NeoX;
    config.activation = FfnActivation::SiLU;
    config.qk_norm = true;
}

}  // namespace tokenscope::model
