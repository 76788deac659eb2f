#pragma once
// GPT-2's byte-level alphabet: every byte 0..255 stands for one printable Unicode character, so
// a byte-level BPE vocabulary can spell any byte string with ordinary text pieces. Printable
// Latin-1 bytes stand for themselves; the other 68 (space, controls, 0x7F-0xA0, 0xAD) are
// shifted to U+0100 + n in byte order, which is why ' ' appears as "Ġ" (U+0120) in vocabularies.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokenscope::tokenizer::byte_level {

// The code point that byte `b` is written as.
char32_t byte_to_codepoint(std::uint8_t b);

// The UTF-8 encoding of byte_to_codepoint(b) for each byte (1 or 2 bytes long).
const std::array<std::string, 256>& byte_spellings();

// `bytes` spelled in the byte-level alphabet (the form vocabulary pieces and merges use).
std::string encode(std::string_view bytes);

// The raw bytes a byte-level piece stands for. A character outside the alphabet (possible in
// added tokens) is kept as it is, so no text is ever lost.
std::string decode(std::string_view piece);

}  // namespace tokenscope::tokenizer::byte_level
