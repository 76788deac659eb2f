#pragma once
// The library a template calls into: attribute and item access with Jinja's rules, the Python
// methods of str/list/dict that templates use, and Jinja's filters and tests. Errors are
// TemplateError without a line number; the renderer adds the line.
#include <optional>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace tokenscope::jinja {

// obj.name as Jinja resolves it: a Python attribute first (for a dict, its methods items/keys/
// values/get; for a str or list, its methods), then the item obj["name"]; Undefined when
// neither exists. Accessing anything on an Undefined raises "'x' is undefined".
Value get_attribute(const Value& obj, std::string_view name);
// obj[key]: the item first, then (for a string key) the attribute.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] with Python's rules (negative indices, omitted bounds, step < 0).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// What `for x in v` walks: list items, dict keys, str characters; nothing for Undefined.
// Throws for values that cannot be iterated (None, numbers).
std::vector<Value> iterate(const Value& v);
// Python `needle in haystack`.
bool contains(const Value& haystack, const Value& needle);

Value apply_filter(std::string_view name, const Value& input, const CallArgs& args);
bool apply_test(std::string_view name, const Value& input, const CallArgs& args);

// The i-th positional or the named argument, or nullptr.
const Value* argument(const CallArgs& args, std::size_t index, std::string_view name);

}  // namespace tokenscope::jinja
