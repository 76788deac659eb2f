// GGUF <-> Vocabulary, and Tokenizer::from_gguf. Kept apart from tokenizer.cpp so that code
// using only tokenizer.model files does not link the GGUF reader and writer.
#include <initializer_list>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocabulary.h"
#include "util/error.h"

namespace tokenscope::tokenizer {

namespace {

[[noreturn]] void fail(const gguf::File& file, std::string_view key, const std::string& what) {
    throw FormatError(fmt::format("{}: key '{}': {}", file.path(), key, what));
}

const gguf::Array& typed_array(const gguf::File& file, std::string_view key,
                               std::initializer_list<gguf::ValueType> allowed) {
    const gguf::Array& array = file.require_array(key);
    for (const auto type : allowed)
        if (array.element_type == type) return array;
    fail(file, key,
         fmt::format("array of {}, expected {}", gguf::value_type_name(array.element_type),
                     gguf::value_type_name(*allowed.begin())));
}

// Special ids are uint32 in GGUF; anything beyond int32 cannot be a token id.
std::int32_t optional_id(const gguf::File& file, std::string_view key) {
    const gguf::Value* v = file.find(key);
    if (v == nullptr) return -1;
    if (!v->is_integer()) fail(file, key, fmt::format("{}, expected an integer", gguf::value_type_name(v->type())));
    const std::int64_t id = v->as_int();
    if (id < -1 || id > std::numeric_limits<std::int32_t>::max())
        fail(file, key, fmt::format("token id {} out of range", id));
    return static_cast<std::int32_t>(id);
}

}  // namespace

Vocabulary vocabulary_from_gguf(const gguf::File& file) {
    constexpr std::string_view kModelKey = "tokenizer.ggml.model";
    const std::string model = file.require_string(kModelKey);
    if (model != "llama")
        fail(file, kModelKey,
             fmt::format("tokenizer model '{}' is not supported (only 'llama', the "
                         "sentencepiece family, is)",
                         model));

    Vocabulary v;
    const auto& tokens = typed_array(file, "tokenizer.ggml.tokens", {gguf::ValueType::String});
    v.tokens.reserve(tokens.items.size());
    for (const auto& item : tokens.items) v.tokens.push_back(item.as_string());

    // Scores are the BPE merge priorities: without them sentencepiece would merge blindly.
    const auto& scores = typed_array(file, "tokenizer.ggml.scores",
                                     {gguf::ValueType::Float32, gguf::ValueType::Float64});
    if (scores.items.size() != v.tokens.size())
        fail(file, "tokenizer.ggml.scores",
             fmt::format("{} scores for {} tokens", scores.items.size(), v.tokens.size()));
    v.scores.reserve(scores.items.size());
    for (const auto& item : scores.items) v.scores.push_back(static_cast<float>(item.as_double()));

    if (file.find("tokenizer.ggml.token_type") != nullptr) {
        constexpr std::string_view kTypeKey = "tokenizer.ggml.token_type";
        const auto& types = typed_array(
            file, kTypeKey,
            {gguf::ValueType::Int32, gguf::ValueType::UInt32, gguf::ValueType::Int8,
             gguf::ValueType::UInt8, gguf::ValueType::Int16, gguf::ValueType::UInt16,
             gguf::ValueType::Int64, gguf::ValueType::UInt64});
        if (types.items.size() != v.tokens.size())
            fail(file, kTypeKey,
                 fmt::format("{} token types for {} tokens", types.items.size(), v.tokens.size()));
        v.types.reserve(types.items.size());
        for (std::size_t i = 0; i < types.items.size(); ++i) {
            const std::int64_t t = types.items[i].as_int();
            if (t < 1 || t > 6)
                fail(file, kTypeKey, fmt::format("token {} has type {} (valid types are 1..6)", i, t));
            v.types.push_back(static_cast<TokenType>(t));
        }
    } else {
        v.types.assign(v.tokens.size(), TokenType::Normal);
    }

    v.bos_id = optional_id(file, "tokenizer.ggml.bos_token_id");
    v.eos_id = optional_id(file, "tokenizer.ggml.eos_token_id");
    v.unk_id = optional_id(file, "tokenizer.ggml.unknown_token_id");
    v.pad_id = optional_id(file, "tokenizer.ggml.padding_token_id");
    // Defaults as llama.cpp reads sentencepiece vocabularies.
    v.add_bos = file.optional_bool("tokenizer.ggml.add_bos_token", true);
    v.add_eos = file.optional_bool("tokenizer.ggml.add_eos_token", false);
    v.add_space_prefix = file.optional_bool("tokenizer.ggml.add_space_prefix", true);
    v.validate(file.path());
    return v;
}

void write_vocabulary(gguf::Writer& writer, const Vocabulary& v) {
    v.validate("write_vocabulary");
    writer.set("tokenizer.ggml.model", gguf::Value::string("llama"));
    writer.set("tokenizer.ggml.tokens", gguf::Value::strings(v.tokens));
    writer.set("tokenizer.ggml.scores", gguf::Value::f32s(v.scores));
    std::vector<std::int32_t> types;
    types.reserve(v.types.size());
    for (const auto t : v.types) types.push_back(static_cast<std::int32_t>(t));
    writer.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
    // Ids are uint32 in GGUF; an absent token is an absent key.
    const auto id = [&](const char* key, std::int32_t value) {
        if (value >= 0) writer.set(key, gguf::Value::u32(static_cast<std::uint32_t>(value)));
    };
    id("tokenizer.ggml.bos_token_id", v.bos_id);
    id("tokenizer.ggml.eos_token_id", v.eos_id);
    id("tokenizer.ggml.unknown_token_id", v.unk_id);
    id("tokenizer.ggml.padding_token_id", v.pad_id);
    writer.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(v.add_bos));
    writer.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(v.add_eos));
    writer.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(v.add_space_prefix));
}

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
    return from_vocabulary(vocabulary_from_gguf(file), file.path());
}

}  // namespace tokenscope::tokenizer
