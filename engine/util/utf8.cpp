#include "util/utf8.h"

namespace tokenscope::utf8 {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
}

int sequence_length(std::string_view text) {
    if (text.empty()) return -1;
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(0);
    if (lead < 0x80) return 1;
    int length;
    // Allowed range of the second byte (RFC 3629 table): rules out overlong forms,
    // surrogates and code points beyond U+10FFFF.
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) lo = 0xA0;
        if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) lo = 0x90;
        if (lead == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    for (int i = 1; i < length; ++i) {
        if (static_cast<std::size_t>(i) >= text.size()) return -1;
        const unsigned char c = byte(i);
        const unsigned char min = i == 1 ? lo : 0x80;
        const unsigned char max = i == 1 ? hi : 0xBF;
        if (c < min || c > max) return 0;
    }
    return length;
}

bool is_valid(std::string_view text) {
    while (!text.empty()) {
        const int n = sequence_length(text);
        if (n <= 0) return false;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

std::string sanitize(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    while (!text.empty()) {
        const int n = sequence_length(text);
        if (n > 0) {
            out.append(text.substr(0, static_cast<std::size_t>(n)));
            text.remove_prefix(static_cast<std::size_t>(n));
        } else {
            out.append(kReplacement);
            text.remove_prefix(1);
        }
    }
    return out;
}

}  // namespace tokenscope::utf8
