#pragma once
// UTF-8 validation shared by the JSON writer and the streaming detokenizer.
#include <cstddef>
#include <string>
#include <string_view>

namespace tokenscope::utf8 {

// Length of the well-formed UTF-8 sequence starting at text[0] (1..4), 0 when the bytes
// there can never start a well-formed sequence (stray continuation byte, overlong form,
// surrogate, beyond U+10FFFF), or -1 when they are a valid but incomplete prefix that more
// bytes could complete.
int sequence_length(std::string_view text);

bool is_valid(std::string_view text);

// Replaces every byte that is not part of a well-formed sequence by U+FFFD.
std::string sanitize(std::string_view text);

}  // namespace tokenscope::utf8
