// Attribute, item and slice access, iteration, and the Python methods of str, list and dict.
#include <algorithm>

#include "jinja/builtins.h"
#include "jinja/string_ops.h"

namespace tokenscope::jinja {

namespace {

[[noreturn]] void undefined_error(const Value& v) {
    throw TemplateError(v.text.empty() ? "value is undefined" : v.text);
}

std::string string_arg(const CallArgs& args, std::size_t index, std::string_view name, std::string_view method) {
    const Value* v = argument(args, index, name);
    if (!v || !v->is_string())
        throw TemplateError(std::string(method) + "() needs a string argument '" + std::string(name) + "'");
    return v->text;
}

// A string argument that may be None (strip(None), split(None)).
std::optional<std::string> optional_string_arg(const CallArgs& args, std::size_t index, std::string_view name) {
    const Value* v = argument(args, index, name);
    if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
    if (!v->is_string()) throw TemplateError("argument '" + std::string(name) + "' must be a string");
    return v->text;
}

std::int64_t int_arg(const CallArgs& args, std::size_t index, std::string_view name, std::int64_t fallback) {
    const Value* v = argument(args, index, name);
    if (!v || v->is_none()) return fallback;
    if (!v->is_integral()) throw TemplateError("argument '" + std::string(name) + "' must be an integer");
    return v->kind == Value::Kind::Bool ? v->boolean : v->integer;
}

Value string_list(std::vector<std::string> parts) {
    Array out;
    out.reserve(parts.size());
    for (auto& p : parts) out.push_back(Value::from(std::move(p)));
    return Value::from(std::move(out));
}

bool affix_match(const std::string& text, const Value& affix, bool prefix) {
    auto one = [&](const Value& a) {
        if (!a.is_string()) throw TemplateError(std::string(prefix ? "startswith" : "endswith") + "() needs a string");
        if (a.text.size() > text.size()) return false;
        return prefix ? text.compare(0, a.text.size(), a.text) == 0
                      : text.compare(text.size() - a.text.size(), a.text.size(), a.text) == 0;
    };
    if (affix.is_array()) return std::any_of(affix.array->begin(), affix.array->end(), one);
    return one(affix);
}

std::vector<std::string> split_lines(const std::string& text) {
    // str.splitlines(): \n, \r, \r\n and the other Unicode line boundaries; no trailing empty.
    std::vector<std::string> lines;
    const auto cps = code_points(text);
    std::string line;
    for (std::size_t i = 0; i < cps.size(); ++i) {
        const char32_t c = cps[i];
        const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                              c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!boundary) {
            append_utf8(line, c);
            continue;
        }
        if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
        lines.push_back(std::move(line));
        line.clear();
    }
    if (!line.empty()) lines.push_back(std::move(line));
    return lines;
}

template <typename Pred>
bool all_chars(const std::string& text, Pred pred) {
    const auto cps = code_points(text);
    return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

std::optional<Value> string_method(const std::string& s, std::string_view name) {
    auto method = [&](auto body) {
        return Value::function("str." + std::string(name), [s, body](const CallArgs& args) { return body(s, args); });
    };
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const StripSide side = name == "strip" ? StripSide::Both : name == "lstrip" ? StripSide::Left : StripSide::Right;
        return method([side](const std::string& self, const CallArgs& args) {
            const auto chars = optional_string_arg(args, 0, "chars");
            return Value::from(strip(self, side, chars ? &*chars : nullptr));
        });
    }
    if (name == "split" || name == "rsplit") {
        const bool right = name == "rsplit";
        return method([right](const std::string& self, const CallArgs& args) {
            const auto sep = optional_string_arg(args, 0, "sep");
            if (sep && sep->empty()) throw TemplateError("empty separator");
            const auto maxsplit = int_arg(args, 1, "maxsplit", -1);
            return string_list(right ? rsplit(self, sep ? &*sep : nullptr, maxsplit)
                                     : split(self, sep ? &*sep : nullptr, maxsplit));
        });
    }
    if (name == "startswith" || name == "endswith") {
        const bool prefix = name == "startswith";
        return method([prefix](const std::string& self, const CallArgs& args) {
            const Value* affix = argument(args, 0, "prefix");
            if (!affix) throw TemplateError("startswith()/endswith() needs an argument");
            return Value::from(affix_match(self, *affix, prefix));
        });
    }
    if (name == "upper") return method([](const std::string& self, const CallArgs&) { return Value::from(ascii_upper(self)); });
    if (name == "lower") return method([](const std::string& self, const CallArgs&) { return Value::from(ascii_lower(self)); });
    if (name == "title") return method([](const std::string& self, const CallArgs&) { return Value::from(python_title(self)); });
    if (name == "capitalize")
        return method([](const std::string& self, const CallArgs&) { return Value::from(python_capitalize(self)); });
    if (name == "replace") {
        return method([](const std::string& self, const CallArgs& args) {
            return Value::from(replace_all(self, string_arg(args, 0, "old", "replace"), string_arg(args, 1, "new", "replace"),
                                           int_arg(args, 2, "count", -1)));
        });
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
        const std::string which(name);
        return method([which](const std::string& self, const CallArgs& args) {
            const std::string sub = string_arg(args, 0, "sub", which);
            const auto at = which[0] == 'r' ? self.rfind(sub) : self.find(sub);
            if (at == std::string::npos) {
                if (which.find("index") != std::string::npos) throw TemplateError("substring not found");
                return Value::from(std::int64_t{-1});
            }
            return Value::from(code_point_count(std::string_view(self).substr(0, at)));
        });
    }
    if (name == "count") {
        return method([](const std::string& self, const CallArgs& args) {
            const std::string sub = string_arg(args, 0, "sub", "count");
            if (sub.empty()) return Value::from(code_point_count(self) + 1);
            std::int64_t n = 0;
            for (auto at = self.find(sub); at != std::string::npos; at = self.find(sub, at + sub.size())) ++n;
            return Value::from(n);
        });
    }
    if (name == "join") {
        return method([](const std::string& self, const CallArgs& args) {
            const Value* items = argument(args, 0, "iterable");
            if (!items) throw TemplateError("join() needs an argument");
            std::string out;
            bool first = true;
            for (const auto& item : iterate(*items)) {
                if (!item.is_string()) throw TemplateError("join() needs strings, got " + item.type_name());
                if (!first) out += self;
                first = false;
                out += item.text;
            }
            return Value::from(std::move(out));
        });
    }
    if (name == "splitlines")
        return method([](const std::string& self, const CallArgs&) { return string_list(split_lines(self)); });
    if (name == "isdigit")
        return method([](const std::string& self, const CallArgs&) {
            return Value::from(all_chars(self, [](char32_t c) { return c >= '0' && c <= '9'; }));
        });
    if (name == "isspace")
        return method([](const std::string& self, const CallArgs&) { return Value::from(all_chars(self, is_python_space)); });
    if (name == "isalpha")
        return method([](const std::string& self, const CallArgs&) {
            return Value::from(all_chars(self, [](char32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }));
        });
    if (name == "islower" || name == "isupper") {
        const bool lower = name == "islower";
        return method([lower](const std::string& self, const CallArgs&) {
            const bool has_cased = std::any_of(self.begin(), self.end(), [](char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; });
            return Value::from(has_cased && (lower ? ascii_lower(self) == self : ascii_upper(self) == self));
        });
    }
    return std::nullopt;
}

std::optional<Value> dict_method(const Value& obj, std::string_view name) {
    auto o = obj.object;
    if (name == "items") {
        return Value::function("dict.items", [o](const CallArgs&) {
            Array out;
            for (const auto& [k, v] : o->items) out.push_back(Value::from(Array{Value::from(k), v}, true));
            return Value::from(std::move(out));
        });
    }
    if (name == "keys") {
        return Value::function("dict.keys", [o](const CallArgs&) {
            Array out;
            for (const auto& [k, v] : o->items) out.push_back(Value::from(k));
            return Value::from(std::move(out));
        });
    }
    if (name == "values") {
        return Value::function("dict.values", [o](const CallArgs&) {
            Array out;
            for (const auto& [k, v] : o->items) out.push_back(v);
            return Value::from(std::move(out));
        });
    }
    if (name == "get") {
        return Value::function("dict.get", [o](const CallArgs& args) {
            const Value* key = argument(args, 0, "key");
            if (!key) throw TemplateError("get() needs a key");
            if (key->is_string())
                if (const Value* v = o->find(key->text)) return *v;
            const Value* fallback = argument(args, 1, "default");
            return fallback ? *fallback : Value::none();
        });
    }
    return std::nullopt;
}

std::optional<Value> list_method(const Value& obj, std::string_view name) {
    auto a = obj.array;
    if (name == "index" || name == "count") {
        const bool index = name == "index";
        return Value::function(index ? "list.index" : "list.count", [a, index](const CallArgs& args) {
            const Value* x = argument(args, 0, "value");
            if (!x) throw TemplateError("list method needs an argument");
            std::int64_t n = 0;
            for (std::size_t i = 0; i < a->size(); ++i) {
                if (!equal((*a)[i], *x)) continue;
                if (index) return Value::from(static_cast<std::int64_t>(i));
                ++n;
            }
            if (index) throw TemplateError(x->repr() + " is not in list");
            return Value::from(n);
        });
    }
    return std::nullopt;
}

bool is_mutating_method(std::string_view name) {
    static const char* const kNames[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort",
                                         "reverse", "update", "setdefault", "popitem", "add", "discard"};
    return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; });
}

std::int64_t normalize_index(std::int64_t i, std::int64_t size) { return i < 0 ? i + size : i; }

}  // namespace

const Value* argument(const CallArgs& args, std::size_t index, std::string_view name) {
    if (index < args.positional.size()) return &args.positional[index];
    return args.named_arg(name);
}

Value get_attribute(const Value& obj, std::string_view name) {
    switch (obj.kind) {
        case Value::Kind::Undefined: undefined_error(obj);
        case Value::Kind::String:
            if (auto m = string_method(obj.text, name)) return *m;
            break;
        case Value::Kind::Array:
            if (auto m = list_method(obj, name)) return *m;
            break;
        case Value::Kind::Object:
            if (!obj.object->is_namespace)
                if (auto m = dict_method(obj, name)) return *m;
            if (const Value* v = obj.object->find(name)) return *v;
            break;
        default: break;
    }
    if ((obj.is_array() || obj.is_object()) && is_mutating_method(name))
        throw TemplateError("access to attribute '" + std::string(name) + "' of '" + obj.type_name() +
                            "' object is unsafe (the sandbox makes values immutable)");
    return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + std::string(name) + "'");
}

Value get_item(const Value& obj, const Value& key) {
    switch (obj.kind) {
        case Value::Kind::Undefined: undefined_error(obj);
        case Value::Kind::Array:
            if (key.is_integral()) {
                const auto size = static_cast<std::int64_t>(obj.array->size());
                const auto i = normalize_index(key.kind == Value::Kind::Bool ? key.boolean : key.integer, size);
                if (i >= 0 && i < size) return (*obj.array)[static_cast<std::size_t>(i)];
                return Value::undefined("list index " + key.repr() + " is out of range");
            }
            break;
        case Value::Kind::String:
            if (key.is_integral()) {
                const auto cps = code_points(obj.text);
                const auto size = static_cast<std::int64_t>(cps.size());
                const auto i = normalize_index(key.integer, size);
                if (i >= 0 && i < size) return Value::from(to_utf8(cps, static_cast<std::size_t>(i), static_cast<std::size_t>(i) + 1));
                return Value::undefined("string index " + key.repr() + " is out of range");
            }
            break;
        case Value::Kind::Object:
            if (key.is_string()) {
                if (const Value* v = obj.object->find(key.text)) return *v;
            } else if (const Value* v = obj.object->find(key.str())) {
                return *v;
            }
            break;
        default: break;
    }
    if (key.is_string()) return get_attribute(obj, key.text);
    return Value::undefined("'" + obj.type_name() + " object' has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step_value) {
    if (obj.is_undefined()) undefined_error(obj);
    auto bound = [](const Value& v, const char* what) -> std::optional<std::int64_t> {
        if (v.is_undefined() || v.is_none()) return std::nullopt;
        if (!v.is_integral()) throw TemplateError(std::string("slice ") + what + " must be an integer");
        return v.integer;
    };
    const auto step = bound(step_value, "step").value_or(1);
    if (step == 0) throw TemplateError("slice step cannot be zero");
    std::vector<char32_t> cps;
    std::int64_t size = 0;
    if (obj.is_string()) {
        cps = code_points(obj.text);
        size = static_cast<std::int64_t>(cps.size());
    } else if (obj.is_array()) {
        size = static_cast<std::int64_t>(obj.array->size());
    } else {
        throw TemplateError("'" + obj.type_name() + "' object cannot be sliced");
    }
    // Python's slice.indices().
    auto clamp = [&](std::optional<std::int64_t> v, std::int64_t fallback) {
        if (!v) return fallback;
        std::int64_t i = *v < 0 ? *v + size : *v;
        if (step > 0) return std::clamp<std::int64_t>(i, 0, size);
        return std::clamp<std::int64_t>(i, -1, size - 1);
    };
    const std::int64_t lo = clamp(bound(start, "start"), step > 0 ? 0 : size - 1);
    const std::int64_t hi = clamp(bound(stop, "stop"), step > 0 ? size : -1);
    std::vector<std::int64_t> picks;
    for (std::int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) picks.push_back(i);
    if (obj.is_string()) {
        std::string out;
        for (auto i : picks) append_utf8(out, cps[static_cast<std::size_t>(i)]);
        return Value::from(std::move(out));
    }
    Array out;
    for (auto i : picks) out.push_back((*obj.array)[static_cast<std::size_t>(i)]);
    return Value::from(std::move(out));
}

std::vector<Value> iterate(const Value& v) {
    switch (v.kind) {
        case Value::Kind::Undefined: return {};
        case Value::Kind::Array: return *v.array;
        case Value::Kind::Object: {
            std::vector<Value> keys;
            for (const auto& [k, _] : v.object->items) keys.push_back(Value::from(k));
            return keys;
        }
        case Value::Kind::String: {
            std::vector<Value> chars;
            const auto cps = code_points(v.text);
            for (std::size_t i = 0; i < cps.size(); ++i) chars.push_back(Value::from(to_utf8(cps, i, i + 1)));
            return chars;
        }
        default: throw TemplateError("'" + v.type_name() + "' object is not iterable");
    }
}

bool contains(const Value& haystack, const Value& needle) {
    switch (haystack.kind) {
        case Value::Kind::Undefined: return false;
        case Value::Kind::String:
            if (!needle.is_string())
                throw TemplateError("'in <string>' requires string as left operand, not " + needle.type_name());
            return haystack.text.find(needle.text) != std::string::npos;
        case Value::Kind::Array:
            return std::any_of(haystack.array->begin(), haystack.array->end(),
                               [&](const Value& x) { return equal(x, needle); });
        case Value::Kind::Object: return needle.is_string() && haystack.object->find(needle.text) != nullptr;
        default: throw TemplateError("argument of type '" + haystack.type_name() + "' is not iterable");
    }
}

}  // namespace tokenscope::jinja
