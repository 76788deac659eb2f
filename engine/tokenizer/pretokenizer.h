#pragma once
// The pre-tokenizer of a byte-level BPE vocabulary: splits text into the words that BPE then
// merges within, never across. GGUF names it in tokenizer.ggml.pre; each name stands for the
// regular expressions of that model's Hugging Face tokenizer, applied one after the other (each
// one splits the pieces the previous left, keeping both its matches and the text between them).
//
// The expressions need Unicode properties (\p{L}, \p{N}, \p{M}) and lookahead, so they run on
// PCRE2 with UTF + UCP and its JIT (see docs/architecture.md, "Byte-level BPE").
//
// Immutable after construction; split() may be called from several threads at once.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tokenscope::tokenizer {

class PreTokenizer {
  public:
    // Throws FormatError naming `origin`, the key and the value when `name` is not one we know.
    static PreTokenizer for_name(std::string_view name, const std::string& origin);
    // The BOS preference of the model that pre-tokenizer `name` belongs to, for when
    // tokenizer.ggml.add_bos_token is absent (as llama.cpp): true for Llama 3. False for names
    // for_name would refuse (that error comes later, when the tokenizer is built).
    static bool default_add_bos(std::string_view name);
    // The names for_name accepts, comma separated (for messages and docs).
    static std::string supported_names();

    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;
    ~PreTokenizer();

    // Appends the words of `text` (well-formed UTF-8) to `words`, as views into `text`, in
    // order; their concatenation is `text`. Throws InvalidArgument if PCRE2 gives up (a match
    // limit), which the fixed expressions here do not reach in practice.
    void split(std::string_view text, std::vector<std::string_view>& words) const;

    const std::string& name() const;
    // Whether a word that is itself in the vocabulary is taken whole instead of being merged
    // (Hugging Face's BPE ignore_merges; Llama 3 sets it).
    bool ignore_merges() const;

  private:
    struct Impl;
    explicit PreTokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace tokenscope::tokenizer
