#include "tokenizer/byte_level.h"

#include "util/utf8.h"

namespace tokenscope::tokenizer::byte_level {

namespace {

bool stands_for_itself(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
    std::array<char32_t, 256> codepoint{};
    std::array<std::string, 256> spelling;
    // Inverse for the code points the alphabet uses (all below U+0144); -1 elsewhere.
    std::array<int, 0x200> byte_of{};

    Tables() {
        byte_of.fill(-1);
        char32_t next_shifted = 0x100;
        for (unsigned b = 0; b < 256; ++b) {
            const char32_t cp = stands_for_itself(b) ? b : next_shifted++;
            codepoint[b] = cp;
            byte_of[cp] = static_cast<int>(b);
            // All code points here are < U+0800: one or two UTF-8 bytes.
            if (cp < 0x80) {
                spelling[b] = std::string(1, static_cast<char>(cp));
            } else {
                spelling[b] = {static_cast<char>(0xC0 | (cp >> 6)),
                               static_cast<char>(0x80 | (cp & 0x3F))};
            }
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

}  // namespace

char32_t byte_to_codepoint(std::uint8_t b) {
    return tables().codepoint[b];
}

const std::array<std::string, 256>& byte_spellings() {
    return tables().spelling;
}

std::string encode(std::string_view bytes) {
    const auto& spelling = tables().spelling;
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) out += spelling[static_cast<unsigned char>(c)];
    return out;
}

std::string decode(std::string_view piece) {
    const auto& byte_of = tables().byte_of;
    std::string out;
    out.reserve(piece.size());
    while (!piece.empty()) {
        const int n = utf8::sequence_length(piece);
        if (n <= 0) {  // not UTF-8 at all: pass the byte through
            out.push_back(piece.front());
            piece.remove_prefix(1);
            continue;
        }
        const auto u = [&](int i) {
            return static_cast<unsigned char>(piece[static_cast<std::size_t>(i)]);
        };
        char32_t cp = 0;
        if (n == 1)
            cp = u(0);
        else if (n == 2)
            cp = ((u(0) & 0x1Fu) << 6) | (u(1) & 0x3Fu);
        else
            cp = 0x10000;  // three- and four-byte characters are never in the alphabet
        if (cp < byte_of.size() && byte_of[cp] >= 0)
            out.push_back(static_cast<char>(byte_of[cp]));
        else
            out.append(piece.substr(0, static_cast<std::size_t>(n)));
        piece.remove_prefix(static_cast<std::size_t>(n));
    }
    return out;
}

}  // namespace tokenscope::tokenizer::byte_level
