// GGUF <-> Vocabulary, and Tokenizer::from_gguf. Kept apart from tokenizer.cpp so that code
// using only tokenizer.model files does not link the GGUF reader and writer.
#include <initializer_list>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tokenizer/pretokenizer.h"
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

void read_scores(const gguf::File& file, Vocabulary& v) {
    constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
    const auto& scores =
        typed_array(file, kScoresKey, {gguf::ValueType::Float32, gguf::ValueType::Float64});
    if (scores.items.size() != v.tokens.size())
        fail(file, kScoresKey,
             fmt::format("{} scores for {} tokens", scores.items.size(), v.tokens.size()));
    v.scores.reserve(scores.items.size());
    for (const auto& item : scores.items) v.scores.push_back(static_cast<float>(item.as_double()));
}

// tokenizer.ggml.merges (required: without it every word would stay split into bytes) and
// tokenizer.ggml.pre (required: guessing a pre-tokenizer would silently give other ids).
void read_bpe_fields(const gguf::File& file, Vocabulary& v) {
    constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
    const auto& merges = typed_array(file, kMergesKey, {gguf::ValueType::String});
    v.merges.reserve(merges.items.size());
    for (const auto& item : merges.items) v.merges.push_back(item.as_string());
    constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
    if (file.find(kPreKey) == nullptr)
        fail(file, kPreKey,
             fmt::format("missing: a byte-level BPE vocabulary needs it to choose its "
                         "pre-tokenizer (supported: {})",
                         PreTokenizer::supported_names()));
    v.pre = file.require_string(kPreKey);
}

}  // namespace

Vocabulary vocabulary_from_gguf(const gguf::File& file) {
    constexpr std::string_view kModelKey = "tokenizer.ggml.model";
    const std::string model = file.require_string(kModelKey);
    Vocabulary v;
    if (model == "llama") {
        v.model = TokenizerModel::SentencePiece;
    } else if (model == "gpt2") {
        v.model = TokenizerModel::ByteLevelBpe;
    } else {
        fail(file, kModelKey,
             fmt::format("tokenizer model '{}' is not supported (supported: 'llama', the "
                         "sentencepiece family, and 'gpt2', byte-level BPE)",
                         model));
    }
    const bool bpe = v.model == TokenizerModel::ByteLevelBpe;

    const auto& tokens = typed_array(file, "tokenizer.ggml.tokens", {gguf::ValueType::String});
    v.tokens.reserve(tokens.items.size());
    for (const auto& item : tokens.items) v.tokens.push_back(item.as_string());

    if (bpe) read_bpe_fields(file, v);
    // Scores are sentencepiece's merge priorities: without them it would merge blindly. BPE
    // ranks merges by tokenizer.ggml.merges instead; its vocabularies usually have no scores.
    if (bpe && file.find("tokenizer.ggml.scores") == nullptr) v.scores.assign(v.tokens.size(), 0.0f);
    else read_scores(file, v);

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
    // Defaults as llama.cpp has them: sentencepiece adds BOS and the dummy prefix; byte-level
    // BPE adds neither, except that the Llama 3 pre-tokenizers imply BOS.
    v.add_bos = file.optional_bool("tokenizer.ggml.add_bos_token",
                                   bpe ? PreTokenizer::default_add_bos(v.pre) : true);
    v.add_eos = file.optional_bool("tokenizer.ggml.add_eos_token", false);
    v.add_space_prefix = file.optional_bool("tokenizer.ggml.add_space_prefix", !bpe);
    v.validate(file.path());
    return v;
}

void write_vocabulary(gguf::Writer& writer, const Vocabulary& v) {
    v.validate("write_vocabulary");
    writer.set("tokenizer.ggml.model", gguf::Value::string(tokenizer_model_name(v.model)));
    writer.set("tokenizer.ggml.tokens", gguf::Value::strings(v.tokens));
    if (v.model == TokenizerModel::ByteLevelBpe) {
        writer.set("tokenizer.ggml.merges", gguf::Value::strings(v.merges));
        writer.set("tokenizer.ggml.pre", gguf::Value::string(v.pre));
    } else {
        writer.set("tokenizer.ggml.scores", gguf::Value::f32s(v.scores));
    }
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
