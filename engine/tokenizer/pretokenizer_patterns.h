#pragma once
// The split expressions of each supported tokenizer.ggml.pre, as facts about the models: they
// are the pre_tokenizer regexes of each model's Hugging Face tokenizer.json (as llama.cpp lists
// them in llama-vocab.cpp), written for PCRE2 with UTF + UCP. Contractions are spelled out
// ('[sS] ...) rather than (?i:...) so that case folding cannot reach beyond ASCII.
#include <span>
#include <string_view>

namespace tokenscope::tokenizer::patterns {

// GPT-2: contractions, letters, numbers, other symbols, each with an optional leading space;
// whitespace runs leave their last space to the next word.
inline constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3: case-insensitive contractions, a letter run may take one leading non-letter,
// numbers in groups of up to three, newlines kept apart.
inline constexpr std::string_view kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen 2: Llama 3's expression with single digits.
inline constexpr std::string_view kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen 3.5: Qwen 2's with combining marks (\p{M}) kept in words and out of symbol runs.
inline constexpr std::string_view kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// StarCoder (and SmolLM, Command-R): every digit on its own, then GPT-2's expression.
inline constexpr std::string_view kSingleDigit = R"(\p{N})";

// Falcon: punctuation runs first, GPT-2's expression, then ASCII digit triples.
inline constexpr std::string_view kFalconPunctuation = R"([\p{P}$\+<=>\^~\|`]+)";
inline constexpr std::string_view kFalconDigits = R"([0-9][0-9][0-9])";

// DeepSeek LLM: newlines alone; runs of cased letters (an explicit list of ranges in the
// model's tokenizer.json, not \p{L}); ASCII and full-width punctuation; trailing whitespace;
// CJK ideographs and Hangul; numbers.
inline constexpr std::string_view kDeepseekNewline = R"([\r\n])";
inline constexpr std::string_view kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
inline constexpr std::string_view kDeepseekPunctuation =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
inline constexpr std::string_view kDeepseekTrailingSpace = R"(\s+$)";
inline constexpr std::string_view kDeepseekCjk =
    R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
inline constexpr std::string_view kDeepseekNumbers = R"(\p{N}+)";

}  // namespace tokenscope::tokenizer::patterns
