#pragma once
// Tiny GGUF models for tests, written with our GGUF writer: seeded random weights, the
// test-trained tokenizer's vocabulary, and the hyperparameter keys llama.cpp's converter
// writes for the architecture.
#include <cstdint>
#include <string>

#include "tensor/type.h"

namespace tokenscope::test {

struct TinyModelSpec {
    std::string architecture = "llama";  // "llama", "gemma3", "qwen2", "qwen3", "phi3"
    std::int64_t width = 64;
    std::int64_t layers = 2;
    std::int64_t heads = 4;
    std::int64_t kv_heads = 2;
    std::int64_t head_dim = 16;
    std::int64_t ffn = 128;
    std::int64_t context = 512;
    std::int64_t sliding_window = 0;  // llama, phi3: every layer; gemma3: the local layers
    float rope_base = 10000.0f;
    float norm_eps = 1e-5f;
    tensor::Type weight_type = tensor::Type::F32;  // for every matrix (norms stay F32)
    bool tied_output = false;  // llama only; gemma3 is always tied
    // tokenizer.chat_template. Empty: none, except gemma3, which gets a small Gemma-style
    // template (the format of the real Gemma 3 instruct models, without their system folding).
    std::string chat_template;
    std::uint64_t seed = 1;
    // Llama 3.x rope scaling as llama.cpp's converter stores it: a rope_freqs.weight tensor of
    // per-pair factors computed from these (Hugging Face rope_scaling "llama3"). factor 0: none.
    struct Llama3RopeScaling {
        double factor = 0.0;
        double low_freq_factor = 1.0;
        double high_freq_factor = 4.0;
        double original_context = 8192.0;
    } llama3_rope;
};

// Writes the model; throws on failure. Returns the vocabulary size.
std::int64_t write_tiny_model(const std::string& path, const TinyModelSpec& spec);

// A path in the scratch dir, written once per process for each distinct name.
std::string tiny_model_path(const std::string& name, const TinyModelSpec& spec);

}  // namespace tokenscope::test
