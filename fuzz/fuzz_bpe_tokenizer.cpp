// Fuzz entry point for the byte-level BPE tokenizer. The first input byte picks a tokenizer,
// the rest is the text. Must hold for every input:
//   - encode (with and without parse_special) neither crashes nor throws anything but
//     tokenscope::Error, and every id is in range;
//   - for well-formed UTF-8 that contains no control-token text, decode(encode(text)) == text,
//     and streaming the ids through StreamingDetokenizer gives the same text.
// Anything else aborts, which libFuzzer (or the replay driver) reports.
//
// Tokenizers: a small synthetic vocabulary under every supported pre-tokenizer (so each
// expression list is exercised), plus the real vocabularies named in TOKENSCOPE_FUZZ_BPE_VOCABS
// (colon-separated GGUF paths, e.g. ../shared/testdata/bpe/ggml-vocab-qwen35.gguf).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocabulary.h"
#include "util/error.h"
#include "util/utf8.h"

namespace {

using tokenscope::tokenizer::Tokenizer;
using tokenscope::tokenizer::TokenType;
using tokenscope::tokenizer::Vocabulary;

// Every byte as a token, a few merged English pieces, one added and one control token.
Vocabulary synthetic_vocabulary(const std::string& pre) {
    Vocabulary v;
    v.model = tokenscope::tokenizer::TokenizerModel::ByteLevelBpe;
    v.pre = pre;
    const auto& bytes = tokenscope::tokenizer::byte_level::byte_spellings();
    v.tokens.assign(bytes.begin(), bytes.end());
    const std::string space = bytes[' '];
    v.merges = {space + " t", "h e", space + "t he", "i n", "in g", "e r", "1 2", "12 3"};
    for (const auto& merge : v.merges) {
        const auto at = merge.find(' ');
        v.tokens.push_back(merge.substr(0, at) + merge.substr(at + 1));
    }
    v.types.assign(v.tokens.size(), TokenType::Normal);
    v.tokens.push_back("<tool>");
    v.types.push_back(TokenType::UserDefined);
    v.tokens.push_back("<|end|>");
    v.types.push_back(TokenType::Control);
    v.eos_id = static_cast<std::int32_t>(v.tokens.size()) - 1;
    v.scores.assign(v.tokens.size(), 0.0f);
    v.add_space_prefix = false;
    return v;
}

struct Target {
    std::unique_ptr<Tokenizer> tokenizer;
    std::vector<std::string> control_pieces;  // text that would not round-trip

    explicit Target(Tokenizer tok) : tokenizer(std::make_unique<Tokenizer>(std::move(tok))) {
        for (std::int32_t id = 0; id < tokenizer->vocab_size(); ++id)
            if (tokenizer->is_control(id) && !tokenizer->piece(id).empty())
                control_pieces.push_back(tokenizer->piece(id));
    }
    bool contains_control_text(std::string_view text) const {
        for (const auto& piece : control_pieces)
            if (text.find(piece) != std::string_view::npos) return true;
        return false;
    }
};

std::vector<Target> make_targets() {
    std::vector<Target> out;
    for (const char* pre : {"llama-bpe", "qwen2", "qwen35", "smollm", "gpt-2", "deepseek-llm",
                            "starcoder", "falcon", "command-r"})
        out.emplace_back(
            Tokenizer::from_vocabulary(synthetic_vocabulary(pre), std::string("synthetic-") + pre));
    if (const char* paths = std::getenv("TOKENSCOPE_FUZZ_BPE_VOCABS")) {
        std::istringstream list(paths);
        for (std::string path; std::getline(list, path, ':');) {
            if (path.empty()) continue;
            const auto file = tokenscope::gguf::File::open(path);
            out.emplace_back(Tokenizer::from_gguf(file));
            std::fprintf(stderr, "fuzz_bpe_tokenizer: loaded %s\n", path.c_str());
        }
    }
    return out;
}

const std::vector<Target>& targets() {
    static const auto all = make_targets();
    return all;
}

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_bpe_tokenizer: %s\n", what);
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const auto& all = targets();
    const Target& target = all[data[0] % all.size()];
    const Tokenizer& tok = *target.tokenizer;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        for (const bool parse_special : {false, true}) {
            const auto ids = tok.encode(text, {.parse_special = parse_special});
            for (const auto id : ids) check(id >= 0 && id < tok.vocab_size(), "id out of range");
            if (parse_special) continue;
            if (!tokenscope::utf8::is_valid(text) || target.contains_control_text(text)) continue;
            check(tok.decode(ids) == text, "decode(encode(text)) != text");
            tokenscope::tokenizer::StreamingDetokenizer detok(tok);
            std::string streamed;
            for (const auto id : ids) streamed += detok.push(id);
            streamed += detok.flush();
            check(streamed == text, "streamed text != text");
        }
    } catch (const tokenscope::Error&) {
        // A refusal with a message is allowed (none is expected for text input).
    }
    return 0;
}
