#pragma once
// JSON in and out of template values. parse_json reads the context a caller hands the renderer
// (RFC 8259; a clear error with the byte offset otherwise). to_json writes what Hugging Face's
// `tojson` filter writes, i.e. Python's json.dumps(x, ensure_ascii=False, indent=..., separators=...,
// sort_keys=...): ", " and ": " separators without indent, "," and ": " with it; non-ASCII text
// as is; floats as Python's repr.
#include <optional>
#include <string>
#include <string_view>

#include "jinja/value.h"

namespace tokenscope::jinja {

// Throws TemplateError "JSON: <problem> at byte N".
Value parse_json(std::string_view text);

struct JsonStyle {
    std::optional<int> indent;             // nullopt: one line
    std::optional<std::string> item_separator;
    std::optional<std::string> key_separator;
    bool sort_keys = false;
    bool ensure_ascii = false;
};

// Throws TemplateError for values JSON cannot hold (undefined, functions).
std::string to_json(const Value& value, const JsonStyle& style = {});

}  // namespace tokenscope::jinja
