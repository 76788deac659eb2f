#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/model_proto.h"
#include "tokenizer/pretokenizer.h"
#include "util/error.h"
#include "util/utf8.h"

namespace tokenscope::tokenizer {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 "▁"
// What sentencepiece shows for <unk>: " ⁇ " (U+2047), visible but unmistakable.
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";

int byte_piece_value(std::string_view piece) {
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
    int value = 0;
    for (const char c : piece.substr(3, 2)) {
        value <<= 4;
        if (c >= '0' && c <= '9') value |= c - '0';
        else if (c >= 'A' && c <= 'F') value |= c - 'A' + 10;
        else if (c >= 'a' && c <= 'f') value |= c - 'a' + 10;
        else return -1;
    }
    return value;
}

std::string unescape_spaces(std::string_view piece) {
    std::string out;
    out.reserve(piece.size());
    while (!piece.empty()) {
        if (piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol) {
            out.push_back(' ');
            piece.remove_prefix(kSpaceSymbol.size());
        } else {
            out.push_back(piece.front());
            piece.remove_prefix(1);
        }
    }
    return out;
}

}  // namespace

struct Tokenizer::Impl {
    Vocabulary vocab;
    std::string origin;
    sentencepiece::SentencePieceProcessor sp;  // the sentencepiece family only
    // Byte-level BPE only (both null for sentencepiece).
    std::unique_ptr<PreTokenizer> pre;
    std::unique_ptr<BpeModel> bpe;
    // Decoded bytes of every token, and whether its leading ' ' is the dummy prefix that
    // decoding drops at the start of the text (only pieces that began with "▁").
    std::vector<std::string> surface;
    std::vector<bool> strips_leading_space;
    std::unordered_map<std::string_view, std::int32_t> piece_ids;
    // Token strings matched in the text before it is encoded: control tokens (only with
    // parse_special) and, for BPE, user-defined (added) tokens, always, as Hugging Face and
    // llama.cpp match them (sentencepiece matches its user-defined pieces itself). Lookup by
    // text, the lengths to try (longest first) and the bytes such a string can start with, so
    // most positions cost one test.
    std::unordered_map<std::string_view, std::int32_t> specials;
    bool has_user_defined_specials = false;
    std::vector<std::size_t> special_lengths;
    std::array<bool, 256> special_first_byte{};

    void index();
    bool is_bpe() const { return pre != nullptr; }  // set before index() runs
    // `at_text_start`: the segment begins the whole text (where a space prefix goes).
    void encode_plain(std::string_view text, bool at_text_start,
                      std::vector<std::int32_t>& out) const;
    void encode_bpe(std::string_view text, bool at_text_start, std::vector<std::int32_t>& out) const;
};

void Tokenizer::Impl::index() {
    const std::size_t n = vocab.size();
    if (!is_bpe() && static_cast<std::size_t>(sp.GetPieceSize()) != n)
        throw FormatError(fmt::format("{}: sentencepiece loaded {} pieces, expected {}", origin,
                                      sp.GetPieceSize(), n));
    surface.resize(n);
    strips_leading_space.assign(n, false);
    piece_ids.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::string& piece = vocab.tokens[i];
        const auto id = static_cast<std::int32_t>(i);
        piece_ids.emplace(piece, id);  // the first of duplicate pieces wins
        const TokenType type = vocab.types[i];
        // (Byte-level vocabularies may name a control token, "<|endoftext|>", as unknown.)
        if ((id == vocab.unk_id && !(is_bpe() && type == TokenType::Control)) ||
            type == TokenType::Unknown) {
            surface[i] = kUnknownSurface;
        } else if (type == TokenType::Control) {
            surface[i].clear();  // invisible, as in sentencepiece's Decode
            specials.emplace(piece, id);
        } else if (type == TokenType::Byte && byte_piece_value(piece) >= 0) {
            surface[i] = std::string(1, static_cast<char>(byte_piece_value(piece)));
        } else if (is_bpe()) {
            // Added tokens are stored as the text they stand for; the others spell bytes in
            // the byte-level alphabet.
            if (type == TokenType::UserDefined) {
                surface[i] = piece;
                if (!piece.empty()) {
                    specials.emplace(piece, id);
                    has_user_defined_specials = true;
                }
            } else {
                surface[i] = byte_level::decode(piece);
            }
            strips_leading_space[i] = vocab.add_space_prefix && type != TokenType::UserDefined &&
                                      !surface[i].empty() && surface[i].front() == ' ';
        } else {
            // Literal spaces count like "▁": the ModelProto escapes them (see model_proto.cpp),
            // so sentencepiece may match such a piece at the very start of the text.
            surface[i] = unescape_spaces(piece);
            strips_leading_space[i] =
                vocab.add_space_prefix && !surface[i].empty() && surface[i].front() == ' ';
        }
    }
    for (const auto& [text, id] : specials) {
        if (text.empty()) continue;
        special_first_byte[static_cast<unsigned char>(text.front())] = true;
        if (std::find(special_lengths.begin(), special_lengths.end(), text.size()) ==
            special_lengths.end())
            special_lengths.push_back(text.size());
    }
    std::sort(special_lengths.rbegin(), special_lengths.rend());
}

void Tokenizer::Impl::encode_plain(std::string_view text, bool at_text_start,
                                   std::vector<std::int32_t>& out) const {
    if (is_bpe()) {
        encode_bpe(text, at_text_start, out);
        return;
    }
    if (text.empty()) return;
    std::vector<int> ids;
    const auto status = sp.Encode(text, &ids);
    if (!status.ok())
        throw InvalidArgument(fmt::format("{}: sentencepiece could not encode {} bytes: {}",
                                          origin, text.size(), status.ToString()));
    out.insert(out.end(), ids.begin(), ids.end());
}

void Tokenizer::Impl::encode_bpe(std::string_view text, bool at_text_start,
                                 std::vector<std::int32_t>& out) const {
    if (text.empty()) return;
    // The expressions need well-formed UTF-8; ill-formed bytes become U+FFFD, as they would
    // in the Unicode string a Hugging Face tokenizer works on.
    std::string owned;
    if (!utf8::is_valid(text)) {
        owned = utf8::sanitize(text);
        text = owned;
    }
    if (at_text_start && vocab.add_space_prefix) {
        owned = " " + std::string(text);
        text = owned;
    }
    std::vector<std::string_view> words;
    pre->split(text, words);
    for (const std::string_view word : words) bpe->encode_word(word, pre->ignore_merges(), out);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_vocabulary(Vocabulary vocabulary, const std::string& origin) {
    auto impl = std::make_unique<Impl>();
    impl->origin = origin;
    if (vocabulary.model == TokenizerModel::ByteLevelBpe) {
        vocabulary.validate(origin);
        impl->pre = std::make_unique<PreTokenizer>(PreTokenizer::for_name(vocabulary.pre, origin));
        impl->vocab = std::move(vocabulary);
        // piece_ids first: the BPE model resolves every merge through it.
        impl->index();
        impl->bpe = std::make_unique<BpeModel>(impl->vocab, impl->piece_ids, origin);
        return Tokenizer(std::move(impl));
    }
    const std::string proto = build_model_proto(vocabulary, origin);
    const auto status = impl->sp.LoadFromSerializedProto(proto);
    if (!status.ok())
        throw FormatError(fmt::format("{}: sentencepiece refused the vocabulary: {}", origin,
                                      status.ToString()));
    impl->vocab = std::move(vocabulary);
    impl->index();
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_model_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw IoError(fmt::format("{}: cannot open: {}", path, system_error_text(errno)));
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw IoError(fmt::format("{}: read failed", path));

    auto impl = std::make_unique<Impl>();
    impl->origin = path;
    impl->vocab = parse_model_proto(bytes, path);
    // The file's own bytes go to sentencepiece, so anything we do not parse (a precompiled
    // normaliser, a unigram model) still takes effect.
    const auto status = impl->sp.LoadFromSerializedProto(bytes);
    if (!status.ok())
        throw FormatError(fmt::format("{}: sentencepiece refused the model: {}", path,
                                      status.ToString()));
    impl->index();
    return Tokenizer(std::move(impl));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
    std::vector<std::int32_t> out;
    if (options.add_bos) {
        if (impl_->vocab.bos_id < 0)
            throw InvalidArgument(
                fmt::format("{}: BOS requested but the vocabulary has no BOS token", impl_->origin));
        out.push_back(impl_->vocab.bos_id);
    }
    if (impl_->specials.empty() || (!options.parse_special && !impl_->has_user_defined_specials)) {
        impl_->encode_plain(text, true, out);
        return out;
    }
    // Split at special-token strings (longest match wins) and encode the text between them
    // on its own, each piece with sentencepiece's usual dummy prefix: that is what
    // llama.cpp and the reference (legacy) Hugging Face tokenizers do. Without parse_special
    // only user-defined tokens match, so typed text can never produce a control token.
    std::size_t segment_start = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        if (impl_->special_first_byte[static_cast<unsigned char>(text[i])]) {
            bool matched = false;
            for (const std::size_t length : impl_->special_lengths) {
                if (length > text.size() - i) continue;
                const auto it = impl_->specials.find(text.substr(i, length));
                if (it == impl_->specials.end()) continue;
                if (!options.parse_special && !is_user_defined(it->second)) continue;
                impl_->encode_plain(text.substr(segment_start, i - segment_start),
                                    segment_start == 0, out);
                out.push_back(it->second);
                i += length;
                segment_start = i;
                matched = true;
                break;
            }
            if (matched) continue;
        }
        ++i;
    }
    impl_->encode_plain(text.substr(segment_start), segment_start == 0, out);
    return out;
}

void Tokenizer::clear_thread_caches() { BpeModel::clear_thread_cache(); }

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
    std::string raw;
    bool at_start = true;
    for (const std::int32_t id : ids) {
        raw.append(token_bytes(id, at_start));
        if (!is_control(id)) at_start = false;
    }
    // Byte pieces may spell ill-formed UTF-8; replacing it here (rather than per token)
    // keeps characters split across byte tokens intact.
    return utf8::sanitize(raw);
}

std::string_view Tokenizer::token_bytes(std::int32_t id, bool at_start) const {
    check_id(id);
    const std::string_view s = impl_->surface[static_cast<std::size_t>(id)];
    if (at_start && impl_->strips_leading_space[static_cast<std::size_t>(id)] && !s.empty() &&
        s.front() == ' ')
        return s.substr(1);
    return s;
}

void Tokenizer::check_id(std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->vocab.size())
        throw InvalidArgument(fmt::format("token id {} out of range (vocabulary has {} tokens)",
                                          id, impl_->vocab.size()));
}

std::int32_t Tokenizer::vocab_size() const { return static_cast<std::int32_t>(impl_->vocab.size()); }

const std::string& Tokenizer::piece(std::int32_t id) const {
    check_id(id);
    return impl_->vocab.tokens[static_cast<std::size_t>(id)];
}

float Tokenizer::score(std::int32_t id) const {
    check_id(id);
    return impl_->vocab.scores[static_cast<std::size_t>(id)];
}

TokenType Tokenizer::type(std::int32_t id) const {
    check_id(id);
    return impl_->vocab.types[static_cast<std::size_t>(id)];
}

bool Tokenizer::is_control(std::int32_t id) const { return type(id) == TokenType::Control; }
bool Tokenizer::is_byte(std::int32_t id) const { return type(id) == TokenType::Byte; }
bool Tokenizer::is_user_defined(std::int32_t id) const {
    return type(id) == TokenType::UserDefined;
}
const std::string& Tokenizer::pre_tokenizer() const {
    static const std::string none;
    return impl_->pre ? impl_->pre->name() : none;
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view piece) const {
    const auto it = impl_->piece_ids.find(piece);
    if (it == impl_->piece_ids.end()) return std::nullopt;
    return it->second;
}

std::int32_t Tokenizer::bos_id() const { return impl_->vocab.bos_id; }
std::int32_t Tokenizer::eos_id() const { return impl_->vocab.eos_id; }
std::int32_t Tokenizer::unk_id() const { return impl_->vocab.unk_id; }
std::int32_t Tokenizer::pad_id() const { return impl_->vocab.pad_id; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->vocab.add_space_prefix; }
const Vocabulary& Tokenizer::vocabulary() const { return impl_->vocab; }

}  // namespace tokenscope::tokenizer
