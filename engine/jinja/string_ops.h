#pragma once
// Python str semantics over UTF-8 text, for the template functions that count or cut by
// character: len(), s[i], s[a:b:c], strip() and split() with Python's notion of whitespace.
// Invalid UTF-8 bytes count as one character each (templates only see text we produced from
// valid UTF-8, so this only has to be safe, not clever).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokenscope::jinja {

std::vector<char32_t> code_points(std::string_view text);
std::string to_utf8(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end);
void append_utf8(std::string& out, char32_t cp);
std::int64_t code_point_count(std::string_view text);

// str.isspace() for one code point (ASCII controls 9-13 and 28-31, space, NEL, NBSP and the
// Unicode space separators).
bool is_python_space(char32_t cp);

enum class StripSide { Left, Right, Both };
// str.strip()/lstrip()/rstrip(): with `chars` null, Python whitespace; else any code point in
// *chars.
std::string strip(std::string_view text, StripSide side, const std::string* chars = nullptr);

// str.split(sep, maxsplit): with `sep` null, runs of whitespace and no empty parts. maxsplit
// < 0 means no limit. rsplit counts maxsplit from the right.
std::vector<std::string> split(std::string_view text, const std::string* sep, std::int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view text, const std::string* sep, std::int64_t maxsplit);

std::string replace_all(std::string_view text, std::string_view from, std::string_view to,
                        std::int64_t count = -1);

// ASCII case mapping only (the templates apply these to role names and fixed words).
std::string ascii_upper(std::string_view text);
std::string ascii_lower(std::string_view text);
std::string python_title(std::string_view text);
std::string python_capitalize(std::string_view text);

}  // namespace tokenscope::jinja
