#pragma once
// Text <-> token ids for sentencepiece-family vocabularies (Llama 2, Gemma), backed by
// libsentencepiece, and for byte-level BPE vocabularies (GGUF model "gpt2": Llama 3, Qwen,
// SmolLM2, ...), encoded here (pretokenizer.h, bpe_model.h). Decoding is done here from the
// vocabulary for both, so that it agrees byte for byte with StreamingDetokenizer.
//
// A Tokenizer is immutable after construction; encode/decode may be called from several
// threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocabulary.h"

namespace tokenscope::gguf {
class File;
}

namespace tokenscope::tokenizer {

struct EncodeOptions {
    // Prepend the BOS token. Off by default: callers (chat templates) decide, and
    // Tokenizer::add_bos() tells what the model prefers.
    bool add_bos = false;
    // Recognise control-token strings ("<start_of_turn>", "</s>") in the text and emit their
    // ids. Off by default so that text a user typed can never inject a control token.
    // User-defined (added) tokens are matched either way, as the vocabulary asks.
    bool parse_special = false;
};

class Tokenizer {
public:
    // Throws FormatError when sentencepiece refuses the synthesised model.
    static Tokenizer from_vocabulary(Vocabulary vocabulary, const std::string& origin = "vocabulary");
    // tokenizer.ggml.* of a GGUF whose tokenizer.ggml.model is "llama" or "gpt2". Throws
    // FormatError naming the file and key (unknown model or pre-tokenizer, a bad merge).
    static Tokenizer from_gguf(const gguf::File& file);
    // A sentencepiece tokenizer.model file. Throws IoError / FormatError.
    static Tokenizer from_model_file(const std::string& path);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    std::vector<std::int32_t> encode(std::string_view text, EncodeOptions options = {}) const;
    // Byte-level BPE caches the tokens of short words per thread (running text repeats them);
    // this empties the calling thread's cache, so a benchmark can time text never seen.
    static void clear_thread_caches();
    // Control tokens decode to nothing; byte pieces are joined and any ill-formed UTF-8 that
    // results becomes U+FFFD. Throws InvalidArgument on an id out of range.
    std::string decode(std::span<const std::int32_t> ids) const;

    // The raw bytes token `id` contributes to decoded text: "▁" turned into ' ', a byte piece
    // as its single byte (possibly part of a multi-byte character), control tokens as "".
    // `at_start`: nothing visible has been decoded yet, so the dummy-prefix space is dropped.
    std::string_view token_bytes(std::int32_t id, bool at_start) const;

    std::int32_t vocab_size() const;
    const std::string& piece(std::int32_t id) const;  // as in the vocabulary, "▁" included
    float score(std::int32_t id) const;
    TokenType type(std::int32_t id) const;
    bool is_control(std::int32_t id) const;
    bool is_byte(std::int32_t id) const;
    bool is_user_defined(std::int32_t id) const;
    // tokenizer.ggml.pre of a byte-level BPE vocabulary; empty for sentencepiece.
    const std::string& pre_tokenizer() const;
    std::optional<std::int32_t> token_id(std::string_view piece) const;

    std::int32_t bos_id() const;  // -1 when the vocabulary has none
    std::int32_t eos_id() const;
    std::int32_t unk_id() const;
    std::int32_t pad_id() const;
    bool add_bos() const;  // the model's preference (tokenizer.ggml.add_bos_token)
    bool add_eos() const;
    bool add_space_prefix() const;
    const Vocabulary& vocabulary() const;

private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    void check_id(std::int32_t id) const;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tokenscope::tokenizer
