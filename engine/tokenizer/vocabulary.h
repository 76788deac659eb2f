#pragma once
// A sentencepiece-style vocabulary as GGUF stores it (tokenizer.ggml.*): one entry per token
// id with its piece, score and type. Both ways of building a Tokenizer (from a GGUF, from a
// tokenizer.model file) produce one of these first, so the rest of the tokenizer only ever
// deals with a single representation.
#include <cstdint>
#include <string>
#include <vector>

namespace tokenscope::gguf {
class File;
class Writer;
}

namespace tokenscope::tokenizer {

// The values are those of GGUF's tokenizer.ggml.token_type, which are in turn those of
// sentencepiece's ModelProto.SentencePiece.Type, so they convert without a table.
enum class TokenType : std::int32_t {
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

const char* token_type_name(TokenType type);

struct Vocabulary {
    std::vector<std::string> tokens;  // pieces, whitespace written as U+2581 "▁"
    std::vector<float> scores;        // BPE merge priorities (higher merges first)
    std::vector<TokenType> types;
    std::int32_t bos_id = -1;  // -1: the vocabulary has none
    std::int32_t eos_id = -1;
    std::int32_t unk_id = -1;
    std::int32_t pad_id = -1;
    bool add_bos = false;  // the model's preference; Tokenizer::encode adds BOS only when asked
    bool add_eos = false;
    bool add_space_prefix = true;  // sentencepiece's add_dummy_prefix

    std::size_t size() const { return tokens.size(); }
    // Throws FormatError when the arrays disagree in length or a special id is out of range.
    // `origin` (a file name) starts the message.
    void validate(const std::string& origin) const;
};

// Reads tokenizer.ggml.* from a GGUF. Only the sentencepiece family ("llama") is supported;
// any other tokenizer.ggml.model is a FormatError naming the model and the key.
Vocabulary vocabulary_from_gguf(const gguf::File& file);

// Sets tokenizer.ggml.* (model "llama") as llama.cpp's converter writes them, so that
// vocabulary_from_gguf reads back the same vocabulary. Absent special ids (-1) are left out.
void write_vocabulary(gguf::Writer& writer, const Vocabulary& vocabulary);

}  // namespace tokenscope::tokenizer
