#include "inspect/memory_budget.h"

#include <algorithm>

#include "gguf/file.h"
#include "util/error.h"

namespace tokenscope::inspect {

namespace {

// Some architectures store per-layer head counts as arrays; the budget takes the largest,
// which bounds the cache from above.
std::optional<std::uint64_t> uint_or_max(const gguf::File& file, const std::string& key) {
    const gguf::Value* value = file.find(key);
    if (!value) return std::nullopt;
    try {
        if (value->type() == gguf::ValueType::Array) {
            std::uint64_t largest = 0;
            for (const auto& item : value->as_array().items)
                largest = std::max(largest, item.as_uint());
            return largest;
        }
        return value->as_uint();
    } catch (const InvalidArgument& e) {
        throw FormatError(file.path() + ": key '" + key + "': " + e.what());
    }
}

}  // namespace

std::uint64_t MemoryBudget::kv_bytes_per_token() const {
    if (!kv) return 0;
    const double elements =
        static_cast<double>(kv->layers * kv->kv_heads * (kv->key_length + kv->value_length));
    return static_cast<std::uint64_t>(elements * kv_bytes_per_element);
}

std::uint64_t MemoryBudget::max_context_for(std::uint64_t ram_bytes) const {
    const std::uint64_t per_token = kv_bytes_per_token();
    if (per_token == 0 || ram_bytes <= weight_bytes) return 0;
    std::uint64_t tokens = (ram_bytes - weight_bytes) / per_token;
    if (kv->context_length > 0) tokens = std::min(tokens, kv->context_length);
    return tokens;
}

MemoryBudget memory_budget(const gguf::File& file) {
    MemoryBudget budget;
    budget.weight_bytes = file.tensor_bytes();
    const std::string arch = file.optional_string("general.architecture", "");
    if (arch.empty()) return budget;
    const auto layers = uint_or_max(file, arch + ".block_count");
    const auto heads = uint_or_max(file, arch + ".attention.head_count");
    if (!layers || !heads) return budget;  // not a model file (e.g. a vocabulary)
    if (*heads == 0)
        throw FormatError(file.path() + ": key '" + arch + ".attention.head_count': is 0");
    KvShape shape;
    shape.architecture = arch;
    shape.layers = *layers;
    shape.kv_heads = uint_or_max(file, arch + ".attention.head_count_kv").value_or(*heads);
    const auto embedding = uint_or_max(file, arch + ".embedding_length");
    const std::uint64_t default_head_dim = embedding ? *embedding / *heads : 0;
    shape.key_length = uint_or_max(file, arch + ".attention.key_length").value_or(default_head_dim);
    shape.value_length =
        uint_or_max(file, arch + ".attention.value_length").value_or(shape.key_length);
    shape.context_length = uint_or_max(file, arch + ".context_length").value_or(0);
    if (shape.key_length == 0) {
        throw FormatError(file.path() + ": key '" + arch +
                          ".attention.key_length': head size is 0 or cannot be derived "
                          "(embedding_length is missing)");
    }
    budget.kv = shape;
    return budget;
}

}  // namespace tokenscope::inspect
