#include "jinja/string_ops.h"

#include <algorithm>

#include "util/utf8.h"

namespace tokenscope::jinja {

std::vector<char32_t> code_points(std::string_view text) {
    std::vector<char32_t> out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        const int len = utf8::sequence_length(text.substr(i));
        if (len <= 0) {
            // A byte that starts no valid sequence: keep it as a lone "character" so that
            // joining the pieces back gives the same bytes.
            out.push_back(0xDC00 + static_cast<unsigned char>(text[i]));  // lone surrogate range
            ++i;
            continue;
        }
        const auto* b = reinterpret_cast<const unsigned char*>(text.data() + i);
        char32_t cp = 0;
        switch (len) {
            case 1: cp = b[0]; break;
            case 2: cp = ((b[0] & 0x1Fu) << 6) | (b[1] & 0x3Fu); break;
            case 3: cp = ((b[0] & 0x0Fu) << 12) | ((b[1] & 0x3Fu) << 6) | (b[2] & 0x3Fu); break;
            default:
                cp = ((b[0] & 0x07u) << 18) | ((b[1] & 0x3Fu) << 12) | ((b[2] & 0x3Fu) << 6) |
                     (b[3] & 0x3Fu);
        }
        out.push_back(cp);
        i += static_cast<std::size_t>(len);
    }
    return out;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp >= 0xDC00 && cp <= 0xDCFF) {  // a raw byte kept by code_points()
        out.push_back(static_cast<char>(cp - 0xDC00));
    } else if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string to_utf8(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end) {
    std::string out;
    for (std::size_t i = begin; i < end && i < cps.size(); ++i) append_utf8(out, cps[i]);
    return out;
}

std::int64_t code_point_count(std::string_view text) {
    return static_cast<std::int64_t>(code_points(text).size());
}

bool is_python_space(char32_t cp) {
    if (cp >= 9 && cp <= 13) return true;
    if (cp >= 28 && cp <= 32) return true;
    switch (cp) {
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
        case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

std::string strip(std::string_view text, StripSide side, const std::string* chars) {
    const auto cps = code_points(text);
    std::vector<char32_t> set;
    if (chars) set = code_points(*chars);
    auto strippable = [&](char32_t cp) {
        return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_python_space(cp);
    };
    std::size_t begin = 0, end = cps.size();
    if (side != StripSide::Right)
        while (begin < end && strippable(cps[begin])) ++begin;
    if (side != StripSide::Left)
        while (end > begin && strippable(cps[end - 1])) --end;
    return to_utf8(cps, begin, end);
}

namespace {
std::vector<std::string> split_whitespace(std::string_view text, std::int64_t maxsplit, bool from_right) {
    auto cps = code_points(text);
    if (from_right) std::reverse(cps.begin(), cps.end());
    std::vector<std::string> parts;
    std::size_t i = 0;
    const std::size_t n = cps.size();
    while (i < n) {
        while (i < n && is_python_space(cps[i])) ++i;
        if (i == n) break;
        if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit) {
            // The rest, with trailing whitespace removed, is the last part (Python keeps
            // inner whitespace of the remainder).
            std::size_t end = n;
            while (end > i && is_python_space(cps[end - 1])) --end;
            std::vector<char32_t> rest(cps.begin() + static_cast<std::ptrdiff_t>(i),
                                       cps.begin() + static_cast<std::ptrdiff_t>(end));
            if (from_right) std::reverse(rest.begin(), rest.end());
            parts.push_back(to_utf8(rest, 0, rest.size()));
            break;
        }
        std::size_t j = i;
        while (j < n && !is_python_space(cps[j])) ++j;
        std::vector<char32_t> word(cps.begin() + static_cast<std::ptrdiff_t>(i),
                                   cps.begin() + static_cast<std::ptrdiff_t>(j));
        if (from_right) std::reverse(word.begin(), word.end());
        parts.push_back(to_utf8(word, 0, word.size()));
        i = j;
    }
    if (from_right) std::reverse(parts.begin(), parts.end());
    return parts;
}
}  // namespace

std::vector<std::string> split(std::string_view text, const std::string* sep, std::int64_t maxsplit) {
    if (!sep) return split_whitespace(text, maxsplit, false);
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
        const auto at = text.find(*sep, start);
        if (at == std::string_view::npos) break;
        parts.emplace_back(text.substr(start, at - start));
        start = at + sep->size();
    }
    parts.emplace_back(text.substr(start));
    return parts;
}

std::vector<std::string> rsplit(std::string_view text, const std::string* sep, std::int64_t maxsplit) {
    if (!sep) return split_whitespace(text, maxsplit, true);
    std::vector<std::string> parts;
    std::size_t end = text.size();
    while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
        if (end < sep->size()) break;
        const auto at = text.rfind(*sep, end - sep->size());
        if (at == std::string_view::npos) break;
        parts.emplace_back(text.substr(at + sep->size(), end - at - sep->size()));
        end = at;
    }
    parts.emplace_back(text.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to, std::int64_t count) {
    std::string out;
    if (from.empty()) {
        // Python inserts `to` between characters (and at both ends).
        const auto cps = code_points(text);
        std::int64_t done = 0;
        for (std::size_t i = 0; i <= cps.size(); ++i) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            if (i < cps.size()) append_utf8(out, cps[i]);
        }
        return out;
    }
    std::size_t start = 0;
    std::int64_t done = 0;
    while (count < 0 || done < count) {
        const auto at = text.find(from, start);
        if (at == std::string_view::npos) break;
        out.append(text.substr(start, at - start));
        out.append(to);
        start = at + from.size();
        ++done;
    }
    out.append(text.substr(start));
    return out;
}

std::string ascii_upper(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return out;
}

std::string ascii_lower(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

namespace {
bool ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
}  // namespace

std::string python_title(std::string_view text) {
    std::string out(text);
    bool previous_cased = false;
    for (char& c : out) {
        if (ascii_alpha(c)) {
            c = previous_cased ? ascii_lower(std::string(1, c))[0] : ascii_upper(std::string(1, c))[0];
            previous_cased = true;
        } else {
            // Non-ASCII bytes are neither cased nor uncased here; treat them as letters so a
            // word with an accent is not split in two.
            previous_cased = static_cast<unsigned char>(c) >= 0x80;
        }
    }
    return out;
}

std::string python_capitalize(std::string_view text) {
    std::string out = ascii_lower(text);
    if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
    return out;
}

}  // namespace tokenscope::jinja
