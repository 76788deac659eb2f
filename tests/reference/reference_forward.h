#pragma once
// A deliberately naive float64 forward pass for the tiny test models: textbook formulas,
// one sequence, no cache, no threads, no code shared with the engine's forward pass. Weights
// come from the GGUF through gguf::File and tensor::dequantize_row (both tested on their own,
// the latter against gguf-py), then everything is double.
//
//   x0 = E[token] (* sqrt(d) for Gemma)
//   per layer: h = RMSNorm(x); q, k, v = Wq h, Wk h, Wv h (Qwen 2: + bq, bk, bv; Phi-3: the
//              three are row ranges of one matrix, as Wg and Wu are of ffn_up);
//              (Gemma, Qwen 3: RMSNorm per head of q, k)
//              RoPE(q, k) (Llama 3.x: each pair's frequency divided by rope_freqs);
//              a = softmax(q k^T * scale + causal/window mask) v; o = Wo a
//              (Gemma: o = RMSNorm(o)); x += o; f = Wd (act(Wg RMSNorm(x)) * Wu RMSNorm(x))
//              (Gemma: f = RMSNorm(f)); x += f
//   logits = Wout RMSNorm(x)
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reference/tiny_model.h"

namespace tokenscope::test {

struct ReferenceOutput {
    std::vector<std::vector<double>> logits;  // [position][vocab]
    // attention[layer][head][query] = weights over keys 0..query (zeros where masked)
    std::vector<std::vector<std::vector<std::vector<double>>>> attention;
};

ReferenceOutput reference_forward(const std::string& gguf_path, const TinyModelSpec& spec,
                                  std::span<const std::int32_t> tokens);

// ||a - b|| / ||b|| over one row.
double relative_error(std::span<const float> a, std::span<const double> b);

}  // namespace tokenscope::test
