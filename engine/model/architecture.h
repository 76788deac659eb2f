#pragma once
// The architectures tokenscope runs. Each has a file model/arch_<name>.cpp that reads its
// GGUF keys into a ModelConfig; there is no switch over architectures anywhere else.
#include <span>
#include <string>
#include <string_view>

#include "model/model_config.h"

namespace tokenscope::model {

// Reads GGUF keys prefixed by the architecture name. Helpers used by every arch file.
class HyperparameterReader {
public:
    HyperparameterReader(const gguf::File& file, std::string arch) : file_(file), arch_(std::move(arch)) {}
    std::int64_t require(std::string_view suffix) const;
    std::int64_t optional(std::string_view suffix, std::int64_t fallback) const;
    float optional_float(std::string_view suffix, float fallback) const;
    const gguf::File& file() const { return file_; }
    std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }

private:
    const gguf::File& file_;
    std::string arch_;
};

struct ArchitectureSpec {
    const char* name;  // general.architecture value
    void (*configure)(const HyperparameterReader& keys, ModelConfig& config);
};

std::span<const ArchitectureSpec> supported_architectures();
std::string supported_architecture_names();  // "llama, gemma3, qwen2, qwen3, phi3"

// Defined in the arch files.
void configure_llama(const HyperparameterReader& keys, ModelConfig& config);
void configure_gemma3(const HyperparameterReader& keys, ModelConfig& config);
void configure_qwen2(const HyperparameterReader& keys, ModelConfig& config);
void configure_qwen3(const HyperparameterReader& keys, ModelConfig& config);
void configure_phi3(const HyperparameterReader& keys, ModelConfig& config);

}  // namespace tokenscope::model
