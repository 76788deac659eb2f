#pragma once
// A vocabulary as GGUF stores it (tokenizer.ggml.*): one entry per token id with its piece,
// score and type, and for byte-level BPE the merges and the pre-tokenizer's name. Both ways of
// building a Tokenizer (from a GGUF, from a tokenizer.model file) produce one of these first, so
// the rest of the tokenizer only ever deals with a single representation.
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

// tokenizer.ggml.model: "llama" (sentencepiece) or "gpt2" (byte-level BPE).
enum class TokenizerModel {
    SentencePiece,
    ByteLevelBpe,
};

const char* tokenizer_model_name(TokenizerModel model);  // the GGUF spelling

struct Vocabulary {
    TokenizerModel model = TokenizerModel::SentencePiece;
    // Pieces: sentencepiece writes whitespace as U+2581 "▁"; byte-level BPE spells every byte
    // in GPT-2's alphabet (byte_level.h), so ' ' is "Ġ".
    std::vector<std::string> tokens;
    std::vector<float> scores;  // sentencepiece merge priorities (higher first); 0 for BPE
    std::vector<TokenType> types;
    std::int32_t bos_id = -1;  // -1: the vocabulary has none
    std::int32_t eos_id = -1;
    std::int32_t unk_id = -1;
    std::int32_t pad_id = -1;
    bool add_bos = false;  // the model's preference; Tokenizer::encode adds BOS only when asked
    bool add_eos = false;
    bool add_space_prefix = true;  // sentencepiece's add_dummy_prefix
    // Byte-level BPE only: "left right" pairs, best first (rank = position), and the
    // tokenizer.ggml.pre name that picks the pre-tokenizer (pretokenizer.h).
    std::vector<std::string> merges;
    std::string pre;

    std::size_t size() const { return tokens.size(); }
    // Throws FormatError when the arrays disagree in length or a special id is out of range.
    // `origin` (a file name) starts the message.
    void validate(const std::string& origin) const;
};

// Reads tokenizer.ggml.* from a GGUF: the sentencepiece family ("llama") and byte-level BPE
// ("gpt2"); any other tokenizer.ggml.model is a FormatError naming the model and the key.
Vocabulary vocabulary_from_gguf(const gguf::File& file);

// Sets tokenizer.ggml.* as llama.cpp's converter writes them, so that
// vocabulary_from_gguf reads back the same vocabulary. Absent special ids (-1) are left out.
void write_vocabulary(gguf::Writer& writer, const Vocabulary& vocabulary);

}  // namespace tokenscope::tokenizer
