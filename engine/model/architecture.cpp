#include "model/architecture.h"

#include <cmath>

#include "gguf/file.h"
#include "util/error.h"

namespace tokenscope::model {

namespace {
constexpr ArchitectureSpec kArchitectures[] = {
    {"llama", configure_llama},
    {"gemma3", configure_gemma3},
    {"qwen2", configure_qwen2},
    {"qwen3", configure_qwen3},
    {"phi3", configure_phi3},
};
}  // namespace

std::span<const ArchitectureSpec> supported_architectures() { return kArchitectures; }

std::string supported_architecture_names() {
    std::string names;
    for (const auto& a : kArchitectures) names += (names.empty() ? "" : ", ") + std::string(a.name);
    return names;
}

std::int64_t HyperparameterReader::require(std::string_view suffix) const {
    const std::string k = key(suffix);
    const std::uint64_t value = file_.require_uint(k);
    if (value == 0 || value > (1ull << 40)) {
        throw FormatError(file_.path() + ": key '" + k + "': value " + std::to_string(value) +
                          " is out of range");
    }
    return static_cast<std::int64_t>(value);
}

std::int64_t HyperparameterReader::optional(std::string_view suffix, std::int64_t fallback) const {
    const std::string k = key(suffix);
    if (!file_.find(k)) return fallback;
    return require(suffix);
}

float HyperparameterReader::optional_float(std::string_view suffix, float fallback) const {
    const std::string k = key(suffix);
    const double value = file_.optional_double(k, fallback);
    if (!std::isfinite(value)) {
        throw FormatError(file_.path() + ": key '" + k + "': value is not finite");
    }
    return static_cast<float>(value);
}

ModelConfig load_model_config(const gguf::File& file) {
    const std::string arch = file.require_string("general.architecture");
    const ArchitectureSpec* spec = nullptr;
    for (const auto& a : kArchitectures) {
        if (arch == a.name) spec = &a;
    }
    if (!spec) {
        throw FormatError(file.path() + ": key 'general.architecture': architecture '" + arch +
                          "' is not supported (supported: " + supported_architecture_names() + ")");
    }
    ModelConfig config;
    config.architecture = arch;
    config.name = file.optional_string("general.name", arch);
    const HyperparameterReader keys(file, arch);
    // Keys every architecture shares.
    config.embedding_length = keys.require("embedding_length");
    config.layers = keys.require("block_count");
    config.heads = keys.require("attention.head_count");
    config.kv_heads = keys.optional("attention.head_count_kv", config.heads);
    config.ffn_length = keys.require("feed_forward_length");
    config.context_length = keys.optional("context_length", 2048);
    config.head_dim = keys.optional("attention.key_length", config.embedding_length / config.heads);
    config.value_dim = keys.optional("attention.value_length", config.head_dim);
    config.rope_dims = keys.optional("rope.dimension_count", config.head_dim);
    config.rope_freq_base = keys.optional_float("rope.freq_base", 10000.0f);
    config.rope_freq_base_local = config.rope_freq_base;
    config.norm_eps = keys.optional_float("attention.layer_norm_rms_epsilon", 1e-5f);
    const std::string scaling = file.optional_string(keys.key("rope.scaling.type"), "none");
    if (scaling == "linear") {
        config.rope_linear_scale = keys.optional_float("rope.scaling.factor", 1.0f);
    } else if (scaling != "none") {
        throw FormatError(file.path() + ": key '" + keys.key("rope.scaling.type") +
                          "': rope scaling '" + scaling + "' is not supported (none, linear)");
    }
    config.layer_uses_window.assign(static_cast<std::size_t>(config.layers), false);

    spec->configure(keys, config);

    if (config.attention_scale == 0.0f) {
        config.attention_scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
    }
    auto fail = [&](const std::string& what) {
        throw FormatError(file.path() + ": " + arch + " hyperparameters: " + what);
    };
    if (config.heads % config.kv_heads != 0) {
        fail("head_count " + std::to_string(config.heads) + " is not a multiple of head_count_kv " +
             std::to_string(config.kv_heads));
    }
    if (config.rope_dims > config.head_dim || config.rope_dims % 2 != 0) {
        fail("rope.dimension_count " + std::to_string(config.rope_dims) +
             " must be even and at most the head size " + std::to_string(config.head_dim));
    }
    if (config.value_dim != config.head_dim) {
        fail("value_length " + std::to_string(config.value_dim) + " differs from key_length " +
             std::to_string(config.head_dim) + " (not supported)");
    }
    // The vocabulary size comes from the token list when present (the embedding decides
    // otherwise, checked when the weights are bound).
    if (const gguf::Value* tokens = file.find("tokenizer.ggml.tokens")) {
        if (tokens->type() == gguf::ValueType::Array) {
            config.vocab_size = static_cast<std::int64_t>(tokens->as_array().items.size());
        }
    }
    return config;
}

}  // namespace tokenscope::model
