#include "tokenizer/model_proto.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace tokenscope::tokenizer {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, sentencepiece's "▁"

// Protobuf wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// Field numbers (sentencepiece_model.proto).
namespace model_field {
constexpr int kPieces = 1, kTrainerSpec = 2, kNormalizerSpec = 3;
}
namespace piece_field {
constexpr int kPiece = 1, kScore = 2, kType = 3;
}
namespace trainer_field {
constexpr int kModelType = 3, kVocabSize = 4, kAllowWhitespaceOnlyPieces = 26,
              kByteFallback = 35, kUnkId = 40, kBosId = 41, kEosId = 42, kPadId = 43,
              kUnkPiece = 45, kBosPiece = 46, kEosPiece = 47, kPadPiece = 48;
constexpr int kModelTypeBpe = 2;
}  // namespace trainer_field
namespace normalizer_field {
constexpr int kName = 1, kAddDummyPrefix = 3, kRemoveExtraWhitespaces = 4,
              kEscapeWhitespaces = 5;
}

class WireWriter {
public:
    void varint(int field, std::uint64_t value) {
        tag(field, kVarint);
        raw_varint(value);
    }
    // int32 fields encode negative values as their 64-bit two's complement (10 bytes).
    void int32(int field, std::int32_t value) {
        varint(field, static_cast<std::uint64_t>(static_cast<std::int64_t>(value)));
    }
    void boolean(int field, bool value) { varint(field, value ? 1 : 0); }
    void bytes(int field, std::string_view value) {
        tag(field, kLengthDelimited);
        raw_varint(value.size());
        out_.append(value);
    }
    void float32(int field, float value) {
        tag(field, kFixed32);
        std::uint32_t bits;
        std::memcpy(&bits, &value, sizeof bits);
        for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
    }
    // A SentencePiece message {piece, score, type} as field `field`, written in place (the
    // same bytes as bytes(field, w.str()) for a writer w holding the three fields).
    void piece(int field, std::string_view piece, float score, std::uint64_t type) {
        // One tag byte per field (field numbers under 16), 4 bytes of float.
        static_assert(piece_field::kPiece < 16 && piece_field::kScore < 16 &&
                      piece_field::kType < 16);
        const std::size_t inner =
            1 + varint_size(piece.size()) + piece.size() + 1 + 4 + 1 + varint_size(type);
        tag(field, kLengthDelimited);
        raw_varint(inner);
        bytes(piece_field::kPiece, piece);
        float32(piece_field::kScore, score);
        varint(piece_field::kType, type);
    }
    void reserve(std::size_t bytes) { out_.reserve(bytes); }
    const std::string& str() const { return out_; }

private:
    static std::size_t varint_size(std::uint64_t value) {
        std::size_t n = 1;
        while (value >= 0x80) {
            value >>= 7;
            ++n;
        }
        return n;
    }
    void tag(int field, int wire_type) {
        raw_varint((static_cast<std::uint64_t>(field) << 3) | static_cast<unsigned>(wire_type));
    }
    void raw_varint(std::uint64_t value) {
        while (value >= 0x80) {
            out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
            value >>= 7;
        }
        out_.push_back(static_cast<char>(value));
    }
    std::string out_;
};

// Returns the byte value of a "<0xNN>" piece (sentencepiece writes the hex digits in upper
// case and accepts nothing else), or -1.
int byte_piece_value(std::string_view piece) {
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
    int value = 0;
    for (const char c : piece.substr(3, 2)) {
        value <<= 4;
        if (c >= '0' && c <= '9') value |= c - '0';
        else if (c >= 'A' && c <= 'F') value |= c - 'A' + 10;
        else return -1;
    }
    return value;
}

// The pieces seen so far, as indices into `pieces`, in an open-addressing table: the
// node-based std::unordered_set it replaced spent 47 % of building Gemma 3's 262 144-piece
// model in its inserts (a node allocation and a cache miss each). No erase.
class PieceSet {
  public:
    PieceSet(const std::vector<std::string>& pieces, std::size_t expected) : pieces_(pieces) {
        std::size_t capacity = 16;
        while (capacity < 2 * expected) capacity *= 2;
        slots_.assign(capacity, kEmpty);
    }
    // False (and nothing added) when an equal piece is already in the set.
    bool insert(std::uint32_t index) {
        const std::size_t at = slot_of(pieces_[index]);
        if (slots_[at] != kEmpty) return false;
        slots_[at] = index;
        if (++count_ * 2 > slots_.size()) grow();
        return true;
    }
    bool contains(std::string_view piece) const { return slots_[slot_of(piece)] != kEmpty; }

  private:
    static constexpr std::uint32_t kEmpty = 0xFFFFFFFFu;
    // The slot holding `piece`, or the empty slot where it would go (linear probing; the table
    // is at most half full).
    std::size_t slot_of(std::string_view piece) const {
        const std::size_t mask = slots_.size() - 1;
        std::size_t at = std::hash<std::string_view>{}(piece)&mask;
        while (slots_[at] != kEmpty && pieces_[slots_[at]] != piece) at = (at + 1) & mask;
        return at;
    }
    void grow() {
        std::vector<std::uint32_t> old(slots_.size() * 2, kEmpty);
        old.swap(slots_);
        for (const std::uint32_t index : old) {
            if (index != kEmpty) slots_[slot_of(pieces_[index])] = index;  // pieces are distinct
        }
    }
    const std::vector<std::string>& pieces_;
    std::vector<std::uint32_t> slots_;
    std::size_t count_ = 0;
};

std::string escape_spaces(std::string_view piece) {
    std::string out;
    out.reserve(piece.size());
    for (const char c : piece) {
        if (c == ' ') out.append(kSpaceSymbol);
        else out.push_back(c);
    }
    return out;
}

}  // namespace

std::string build_model_proto(const Vocabulary& vocabulary, const std::string& origin) {
    vocabulary.validate(origin);
    const std::size_t n = vocabulary.size();

    // sentencepiece insists on exactly one UNKNOWN piece. GGUF files name it by
    // tokenizer.ggml.unknown_token_id even where its type says CONTROL (Gemma 3 does).
    std::int64_t unk = vocabulary.unk_id;
    for (std::size_t i = 0; unk < 0 && i < n; ++i)
        if (vocabulary.types[i] == TokenType::Unknown) unk = static_cast<std::int64_t>(i);
    if (unk < 0)
        throw FormatError(fmt::format(
            "{}: the vocabulary has no unknown token (no unknown-token id and no token of type "
            "UNKNOWN); sentencepiece requires one",
            origin));

    // Byte fallback needs all 256 "<0xNN>" pieces; sentencepiece refuses BYTE pieces
    // otherwise, so an incomplete set is kept as UNUSED (still decodable by id).
    std::array<bool, 256> have_byte{};
    for (std::size_t i = 0; i < n; ++i)
        if (vocabulary.types[i] == TokenType::Byte) {
            const int b = byte_piece_value(vocabulary.tokens[i]);
            if (b >= 0) have_byte[static_cast<std::size_t>(b)] = true;
        }
    bool byte_fallback = true;
    for (const bool b : have_byte) byte_fallback = byte_fallback && b;

    // sentencepiece keeps matchable pieces (normal, user-defined, unused) and reserved ones
    // (control, unknown, byte) in two maps and rejects a duplicate within either map. The sets
    // hold indices into proto_pieces, and the pieces are encoded straight into the model's
    // buffer: with a string copy, a node-based set entry and a small writer per piece, Gemma
    // 3's 262 144 pieces took 92-138 ms.
    std::vector<std::string> proto_pieces(n);
    PieceSet matchable(proto_pieces, n), reserved(proto_pieces, 64);

    WireWriter model;
    std::size_t piece_bytes = 0;
    for (const auto& t : vocabulary.tokens) piece_bytes += t.size() + 16;
    model.reserve(piece_bytes + 1024);
    for (std::size_t i = 0; i < n; ++i) {
        TokenType type = vocabulary.types[i];
        if (static_cast<std::int64_t>(i) == unk) type = TokenType::Unknown;
        else if (type == TokenType::Unknown) type = TokenType::Control;
        else if (type == TokenType::Byte &&
                 (!byte_fallback || byte_piece_value(vocabulary.tokens[i]) < 0))
            type = TokenType::Unused;

        std::string& piece = proto_pieces[i];
        // sentencepiece matches pieces against the whitespace-escaped text ("▁" for ' '),
        // but GGUF files store some user-defined pieces (Gemma's runs of spaces) with
        // literal spaces; escape them so they match again.
        if (type == TokenType::Normal || type == TokenType::UserDefined) {
            piece = escape_spaces(vocabulary.tokens[i]);
        } else {
            piece = vocabulary.tokens[i];
        }

        const bool is_matchable = type == TokenType::Normal || type == TokenType::UserDefined ||
                                  type == TokenType::Unused;
        auto& seen = is_matchable ? matchable : reserved;
        const auto index = static_cast<std::uint32_t>(i);
        if (piece.empty() || !seen.insert(index)) {
            // An empty or repeated piece would make sentencepiece refuse the whole model.
            // Give the id a piece no text produces and keep it out of segmentation; decoding
            // by id still uses the original piece.
            type = TokenType::Unused;
            piece = fmt::format("<tokenscope:unreachable:{}>", i);
            while (matchable.contains(piece)) piece += '#';
            matchable.insert(index);
        }
        model.piece(model_field::kPieces, piece, vocabulary.scores[i],
                    static_cast<std::uint64_t>(type));
    }

    WireWriter trainer;
    trainer.varint(trainer_field::kModelType, trainer_field::kModelTypeBpe);
    trainer.int32(trainer_field::kVocabSize, static_cast<std::int32_t>(n));
    trainer.boolean(trainer_field::kAllowWhitespaceOnlyPieces, true);
    trainer.boolean(trainer_field::kByteFallback, byte_fallback);
    trainer.int32(trainer_field::kUnkId, static_cast<std::int32_t>(unk));
    trainer.int32(trainer_field::kBosId, vocabulary.bos_id);
    trainer.int32(trainer_field::kEosId, vocabulary.eos_id);
    trainer.int32(trainer_field::kPadId, vocabulary.pad_id);
    // sentencepiece resolves its bos_id() etc. through these pieces, not the ids above.
    const auto special_piece = [&](int field, std::int32_t id) {
        if (id >= 0) trainer.bytes(field, proto_pieces[static_cast<std::size_t>(id)]);
    };
    special_piece(trainer_field::kUnkPiece, static_cast<std::int32_t>(unk));
    special_piece(trainer_field::kBosPiece, vocabulary.bos_id);
    special_piece(trainer_field::kEosPiece, vocabulary.eos_id);
    special_piece(trainer_field::kPadPiece, vocabulary.pad_id);
    model.bytes(model_field::kTrainerSpec, trainer.str());

    // No precompiled charsmap: the text is not NFKC-normalised, and whitespace is kept as is
    // (remove_extra_whitespaces = false), which is how these vocabularies were trained.
    WireWriter normalizer;
    normalizer.bytes(normalizer_field::kName, "identity");
    normalizer.boolean(normalizer_field::kAddDummyPrefix, vocabulary.add_space_prefix);
    normalizer.boolean(normalizer_field::kRemoveExtraWhitespaces, false);
    normalizer.boolean(normalizer_field::kEscapeWhitespaces, true);
    model.bytes(model_field::kNormalizerSpec, normalizer.str());

    return model.str();
}

namespace {

class WireReader {
public:
    WireReader(std::string_view data, std::size_t base, const std::string& origin)
        : data_(data), base_(base), origin_(origin) {}

    bool done() const { return pos_ >= data_.size(); }

    // Reads a field tag; returns {field, wire_type}.
    std::pair<int, int> tag() {
        const std::size_t at = pos_;
        const std::uint64_t t = varint();
        const auto field = t >> 3;
        if (field == 0 || field > 0x1FFFFFFF) fail(at, fmt::format("invalid field number {}", field));
        return {static_cast<int>(field), static_cast<int>(t & 7)};
    }

    std::uint64_t varint() {
        const std::size_t at = pos_;
        std::uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (pos_ >= data_.size()) fail(at, "truncated varint");
            const auto byte = static_cast<unsigned char>(data_[pos_++]);
            value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
            if ((byte & 0x80) == 0) return value;
        }
        fail(at, "varint longer than 10 bytes");
    }

    std::int32_t int32() { return static_cast<std::int32_t>(static_cast<std::int64_t>(varint())); }

    float float32() {
        if (data_.size() - pos_ < 4) fail(pos_, "truncated fixed32");
        std::uint32_t bits = 0;
        for (int i = 0; i < 4; ++i)
            bits |= static_cast<std::uint32_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
        pos_ += 4;
        float value;
        std::memcpy(&value, &bits, sizeof value);
        return value;
    }

    // A length-delimited payload and its absolute offset.
    std::pair<std::string_view, std::size_t> bytes() {
        const std::size_t at = pos_;
        const std::uint64_t length = varint();
        if (length > data_.size() - pos_)
            fail(at, fmt::format("length {} runs past the end of the message", length));
        const std::size_t start = pos_;
        pos_ += static_cast<std::size_t>(length);
        return {data_.substr(start, static_cast<std::size_t>(length)), base_ + start};
    }

    void expect(int wire_type, int expected, int field) {
        if (wire_type != expected)
            fail(pos_, fmt::format("field {} has wire type {}, expected {}", field, wire_type,
                                   expected));
    }

    void skip(int wire_type) {
        switch (wire_type) {
            case kVarint: varint(); return;
            case kFixed64:
                if (data_.size() - pos_ < 8) fail(pos_, "truncated fixed64");
                pos_ += 8;
                return;
            case kLengthDelimited: bytes(); return;
            case kFixed32:
                if (data_.size() - pos_ < 4) fail(pos_, "truncated fixed32");
                pos_ += 4;
                return;
            default: fail(pos_, fmt::format("unsupported wire type {}", wire_type));
        }
    }

    [[noreturn]] void fail(std::size_t at, const std::string& what) const {
        throw FormatError(fmt::format("{}: offset {}: malformed sentencepiece model: {}", origin_,
                                      base_ + at, what));
    }

private:
    std::string_view data_;
    std::size_t pos_ = 0;
    std::size_t base_;
    const std::string& origin_;
};

}  // namespace

Vocabulary parse_model_proto(std::string_view bytes, const std::string& origin) {
    Vocabulary v;
    // TrainerSpec / NormalizerSpec defaults from the .proto.
    v.unk_id = 0;
    v.bos_id = 1;
    v.eos_id = 2;
    v.pad_id = -1;
    v.add_space_prefix = true;

    WireReader model(bytes, 0, origin);
    while (!model.done()) {
        const auto [field, wire] = model.tag();
        if (field == model_field::kPieces) {
            model.expect(wire, kLengthDelimited, field);
            const auto [payload, base] = model.bytes();
            WireReader sp(payload, base, origin);
            std::string piece;
            float score = 0.0f;
            std::uint64_t type = static_cast<std::uint64_t>(TokenType::Normal);
            while (!sp.done()) {
                const auto [f, w] = sp.tag();
                if (f == piece_field::kPiece) {
                    sp.expect(w, kLengthDelimited, f);
                    piece = std::string(sp.bytes().first);
                } else if (f == piece_field::kScore) {
                    sp.expect(w, kFixed32, f);
                    score = sp.float32();
                } else if (f == piece_field::kType) {
                    sp.expect(w, kVarint, f);
                    type = sp.varint();
                    if (type < 1 || type > 6)
                        sp.fail(0, fmt::format("piece {} has type {}", v.tokens.size(), type));
                } else {
                    sp.skip(w);
                }
            }
            v.tokens.push_back(std::move(piece));
            v.scores.push_back(score);
            v.types.push_back(static_cast<TokenType>(type));
        } else if (field == model_field::kTrainerSpec) {
            model.expect(wire, kLengthDelimited, field);
            const auto [payload, base] = model.bytes();
            WireReader ts(payload, base, origin);
            while (!ts.done()) {
                const auto [f, w] = ts.tag();
                std::int32_t* id = f == trainer_field::kUnkId   ? &v.unk_id
                                   : f == trainer_field::kBosId ? &v.bos_id
                                   : f == trainer_field::kEosId ? &v.eos_id
                                   : f == trainer_field::kPadId ? &v.pad_id
                                                                : nullptr;
                if (id != nullptr) {
                    ts.expect(w, kVarint, f);
                    *id = ts.int32();
                } else {
                    ts.skip(w);
                }
            }
        } else if (field == model_field::kNormalizerSpec) {
            model.expect(wire, kLengthDelimited, field);
            const auto [payload, base] = model.bytes();
            WireReader ns(payload, base, origin);
            while (!ns.done()) {
                const auto [f, w] = ns.tag();
                if (f == normalizer_field::kAddDummyPrefix) {
                    ns.expect(w, kVarint, f);
                    v.add_space_prefix = ns.varint() != 0;
                } else {
                    ns.skip(w);
                }
            }
        } else {
            model.skip(wire);
        }
    }
    if (v.tokens.empty()) model.fail(0, "no pieces");
    // A model that does not define an id (or points past its pieces) simply has no such token.
    for (std::int32_t* id : {&v.bos_id, &v.eos_id, &v.pad_id})
        if (*id < 0 || static_cast<std::size_t>(*id) >= v.tokens.size()) *id = -1;
    // llama.cpp's converter defaults add_bos to true for sentencepiece models; the file itself
    // has no such flag.
    v.add_bos = v.bos_id >= 0;
    v.add_eos = false;
    v.validate(origin);
    return v;
}

}  // namespace tokenscope::tokenizer
