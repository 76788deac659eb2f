#include "tokenizer/vocabulary.h"

#include <fmt/format.h>

#include "util/error.h"

namespace tokenscope::tokenizer {

const char* token_type_name(TokenType type) {
    switch (type) {
        case TokenType::Normal: return "normal";
        case TokenType::Unknown: return "unknown";
        case TokenType::Control: return "control";
        case TokenType::UserDefined: return "user-defined";
        case TokenType::Unused: return "unused";
        case TokenType::Byte: return "byte";
    }
    return "invalid";
}

const char* tokenizer_model_name(TokenizerModel model) {
    switch (model) {
        case TokenizerModel::SentencePiece: return "llama";
        case TokenizerModel::ByteLevelBpe: return "gpt2";
    }
    return "invalid";
}

void Vocabulary::validate(const std::string& origin) const {
    if (tokens.empty()) throw FormatError(fmt::format("{}: the vocabulary is empty", origin));
    if (scores.size() != tokens.size())
        throw FormatError(fmt::format("{}: {} scores for {} tokens", origin, scores.size(),
                                      tokens.size()));
    if (types.size() != tokens.size())
        throw FormatError(fmt::format("{}: {} token types for {} tokens", origin, types.size(),
                                      tokens.size()));
    for (std::size_t i = 0; i < types.size(); ++i) {
        const auto t = static_cast<std::int32_t>(types[i]);
        if (t < 1 || t > 6)
            throw FormatError(
                fmt::format("{}: token {} has type {} (valid types are 1..6)", origin, i, t));
    }
    const auto check_id = [&](const char* what, std::int32_t id) {
        if (id < -1 || (id >= 0 && static_cast<std::size_t>(id) >= tokens.size()))
            throw FormatError(fmt::format("{}: {} id {} out of range (vocabulary has {} tokens)",
                                          origin, what, id, tokens.size()));
    };
    check_id("BOS", bos_id);
    check_id("EOS", eos_id);
    check_id("unknown-token", unk_id);
    check_id("padding", pad_id);
}

}  // namespace tokenscope::tokenizer
