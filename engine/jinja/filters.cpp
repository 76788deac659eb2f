// Jinja's built-in filters and tests, as jinja2 3.1 defines them, plus Hugging Face's tojson.
#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>

#include "jinja/builtins.h"
#include "jinja/json.h"
#include "jinja/string_ops.h"

namespace tokenscope::jinja {

namespace {

bool flag(const CallArgs& args, std::size_t index, std::string_view name, bool fallback) {
    const Value* v = argument(args, index, name);
    return v ? v->truthy() : fallback;
}

// "a.b.0" → obj["a"]["b"][0], as Jinja's attribute= arguments resolve.
Value dotted(const Value& obj, const std::string& path) {
    Value cur = obj;
    std::size_t start = 0;
    while (start <= path.size()) {
        const auto dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (cur.is_undefined()) return cur;
        if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
            cur = get_item(cur, Value::from(static_cast<std::int64_t>(std::stoll(part))));
        else
            cur = get_item(cur, Value::from(part));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return cur;
}

CallArgs rest_args(const CallArgs& args, std::size_t from) {
    CallArgs out;
    for (std::size_t i = from; i < args.positional.size(); ++i) out.positional.push_back(args.positional[i]);
    out.named = args.named;
    return out;
}

std::string required_string(const CallArgs& args, std::size_t index, std::string_view name, std::string_view filter) {
    const Value* v = argument(args, index, name);
    if (!v || !v->is_string()) throw TemplateError("filter '" + std::string(filter) + "' needs a string '" + std::string(name) + "'");
    return v->text;
}

// Sort key comparison with case folding for strings (Jinja's sort/unique/dictsort default).
bool sort_less(const Value& a, const Value& b, bool case_sensitive) {
    if (!case_sensitive && a.is_string() && b.is_string()) return ascii_lower(a.text) < ascii_lower(b.text);
    return less(a, b);
}

Value fold(const Value& v, bool case_sensitive) {
    return !case_sensitive && v.is_string() ? Value::from(ascii_lower(v.text)) : v;
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string indent(const std::string& text, const Value* width, bool first, bool blank) {
    std::string pad = "    ";
    if (width && width->is_string()) pad = width->text;
    else if (width && width->is_integral()) {
        if (width->integer > 4096) throw TemplateError("indent width larger than 4096");
        pad = std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, width->integer)), ' ');
    }
    // jinja2 appends a newline before splitting so that a trailing newline yields no extra line.
    std::vector<std::string> lines;
    {
        const std::string s = text + "\n";
        std::size_t start = 0;
        for (std::size_t at = s.find('\n'); at != std::string::npos; at = s.find('\n', start)) {
            lines.push_back(s.substr(start, at - start));
            start = at + 1;
        }
        if (start < s.size()) lines.push_back(s.substr(start));
    }
    std::string out;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) out += "\n";
        if (i > 0 && (blank || !lines[i].empty())) out += pad;
        out += lines[i];
    }
    if (first) out = pad + out;
    return out;
}

double python_round(double x, std::int64_t digits) {
    const double scale = std::pow(10.0, static_cast<double>(digits));
    // Python rounds halves to even.
    return std::nearbyint(x * scale) / scale;
}

using FilterFn = std::function<Value(const Value&, const CallArgs&)>;

Value select_or_reject(const Value& input, const CallArgs& args, bool by_attribute, bool select) {
    Array out;
    std::size_t next = 0;
    std::string attribute;
    if (by_attribute) attribute = required_string(args, next++, "attribute", select ? "selectattr" : "rejectattr");
    const Value* test = argument(args, next, "");
    const CallArgs test_args = rest_args(args, next + 1);
    for (const auto& item : iterate(input)) {
        const Value subject = by_attribute ? dotted(item, attribute) : item;
        bool pass;
        if (test) {
            if (!test->is_string()) throw TemplateError("select/reject: the test name must be a string");
            pass = apply_test(test->text, subject, test_args);
        } else {
            pass = subject.truthy();
        }
        if (pass == select) out.push_back(item);
    }
    return Value::from(std::move(out));
}

const std::vector<std::pair<std::string_view, FilterFn>>& filter_table() {
    static const std::vector<std::pair<std::string_view, FilterFn>> table = {
        {"trim", [](const Value& v, const CallArgs& a) {
             const Value* chars = argument(a, 0, "chars");
             const std::string c = chars && chars->is_string() ? chars->text : std::string();
             return Value::from(strip(v.str(), StripSide::Both, chars && chars->is_string() ? &c : nullptr));
         }},
        {"length", [](const Value& v, const CallArgs&) {
             switch (v.kind) {
                 case Value::Kind::String: return Value::from(code_point_count(v.text));
                 case Value::Kind::Array: return Value::from(static_cast<std::int64_t>(v.array->size()));
                 case Value::Kind::Object: return Value::from(static_cast<std::int64_t>(v.object->items.size()));
                 case Value::Kind::Undefined: return Value::from(std::int64_t{0});
                 default: throw TemplateError("object of type '" + v.type_name() + "' has no len()");
             }
         }},
        {"tojson", [](const Value& v, const CallArgs& a) {
             JsonStyle style;
             if (const Value* indent = argument(a, 0, "indent"); indent && !indent->is_none())
                 style.indent = static_cast<int>(indent->integer);
             if (const Value* seps = argument(a, 1, "separators"); seps && seps->is_array() && seps->array->size() == 2) {
                 style.item_separator = (*seps->array)[0].str();
                 style.key_separator = (*seps->array)[1].str();
             }
             style.sort_keys = flag(a, 2, "sort_keys", false);
             style.ensure_ascii = flag(a, 3, "ensure_ascii", false);
             return Value::from(to_json(v, style));
         }},
        {"upper", [](const Value& v, const CallArgs&) { return Value::from(ascii_upper(v.str())); }},
        {"lower", [](const Value& v, const CallArgs&) { return Value::from(ascii_lower(v.str())); }},
        {"title", [](const Value& v, const CallArgs&) { return Value::from(python_title(v.str())); }},
        {"capitalize", [](const Value& v, const CallArgs&) { return Value::from(python_capitalize(v.str())); }},
        {"string", [](const Value& v, const CallArgs&) { return Value::from(v.str()); }},
        {"safe", [](const Value& v, const CallArgs&) { return v; }},
        {"escape", [](const Value& v, const CallArgs&) { return Value::from(html_escape(v.str())); }},
        {"default", [](const Value& v, const CallArgs& a) {
             const Value* fallback = argument(a, 0, "default_value");
             const bool boolean = flag(a, 1, "boolean", false);
             if (v.is_undefined() || (boolean && !v.truthy())) return fallback ? *fallback : Value::from("");
             return v;
         }},
        {"first", [](const Value& v, const CallArgs&) {
             const auto items = iterate(v);
             return items.empty() ? Value::undefined("first() of an empty sequence") : items.front();
         }},
        {"last", [](const Value& v, const CallArgs&) {
             const auto items = iterate(v);
             return items.empty() ? Value::undefined("last() of an empty sequence") : items.back();
         }},
        {"list", [](const Value& v, const CallArgs&) { return Value::from(iterate(v)); }},
        {"reverse", [](const Value& v, const CallArgs&) {
             if (v.is_string()) {
                 auto cps = code_points(v.text);
                 std::reverse(cps.begin(), cps.end());
                 return Value::from(to_utf8(cps, 0, cps.size()));
             }
             auto items = iterate(v);
             std::reverse(items.begin(), items.end());
             return Value::from(std::move(items));
         }},
        {"join", [](const Value& v, const CallArgs& a) {
             const Value* sep = argument(a, 0, "d");
             const Value* attribute = argument(a, 1, "attribute");
             std::string out;
             bool first = true;
             for (const auto& item : iterate(v)) {
                 if (!first) out += sep ? sep->str() : "";
                 first = false;
                 out += (attribute ? dotted(item, attribute->str()) : item).str();
             }
             return Value::from(std::move(out));
         }},
        {"replace", [](const Value& v, const CallArgs& a) {
             const Value* count = argument(a, 2, "count");
             return Value::from(replace_all(v.str(), required_string(a, 0, "old", "replace"),
                                            required_string(a, 1, "new", "replace"),
                                            count && count->is_integral() ? count->integer : -1));
         }},
        {"items", [](const Value& v, const CallArgs&) {
             Array out;
             if (v.is_undefined()) return Value::from(std::move(out));
             if (!v.is_object()) throw TemplateError("items() needs a mapping, got " + v.type_name());
             for (const auto& [k, x] : v.object->items) out.push_back(Value::from(Array{Value::from(k), x}, true));
             return Value::from(std::move(out));
         }},
        {"dictsort", [](const Value& v, const CallArgs& a) {
             if (!v.is_object()) throw TemplateError("dictsort needs a mapping, got " + v.type_name());
             const bool case_sensitive = flag(a, 0, "case_sensitive", false);
             const Value* by = argument(a, 1, "by");
             const bool by_value = by && by->is_string() && by->text == "value";
             const bool reverse = flag(a, 2, "reverse", false);
             Array out;
             for (const auto& [k, x] : v.object->items) out.push_back(Value::from(Array{Value::from(k), x}, true));
             std::stable_sort(out.begin(), out.end(), [&](const Value& l, const Value& r) {
                 const Value& x = (*l.array)[by_value ? 1 : 0];
                 const Value& y = (*r.array)[by_value ? 1 : 0];
                 return reverse ? sort_less(y, x, case_sensitive) : sort_less(x, y, case_sensitive);
             });
             return Value::from(std::move(out));
         }},
        {"sort", [](const Value& v, const CallArgs& a) {
             const bool reverse = flag(a, 0, "reverse", false);
             const bool case_sensitive = flag(a, 1, "case_sensitive", false);
             const Value* attribute = argument(a, 2, "attribute");
             auto items = iterate(v);
             auto key = [&](const Value& x) { return attribute ? dotted(x, attribute->str()) : x; };
             std::stable_sort(items.begin(), items.end(), [&](const Value& l, const Value& r) {
                 return reverse ? sort_less(key(r), key(l), case_sensitive) : sort_less(key(l), key(r), case_sensitive);
             });
             return Value::from(std::move(items));
         }},
        {"unique", [](const Value& v, const CallArgs& a) {
             const bool case_sensitive = flag(a, 0, "case_sensitive", false);
             const Value* attribute = argument(a, 1, "attribute");
             Array out;
             std::vector<Value> seen;
             for (const auto& item : iterate(v)) {
                 const Value k = fold(attribute ? dotted(item, attribute->str()) : item, case_sensitive);
                 if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) continue;
                 seen.push_back(k);
                 out.push_back(item);
             }
             return Value::from(std::move(out));
         }},
        {"map", [](const Value& v, const CallArgs& a) {
             Array out;
             if (const Value* attribute = a.named_arg("attribute")) {
                 const Value* fallback = a.named_arg("default");
                 for (const auto& item : iterate(v)) {
                     Value x = dotted(item, attribute->str());
                     out.push_back(x.is_undefined() && fallback ? *fallback : x);
                 }
                 return Value::from(std::move(out));
             }
             if (a.positional.empty() || !a.positional[0].is_string()) throw TemplateError("map needs a filter name or attribute=");
             const CallArgs filter_args = rest_args(a, 1);
             for (const auto& item : iterate(v)) out.push_back(apply_filter(a.positional[0].text, item, filter_args));
             return Value::from(std::move(out));
         }},
        {"select", [](const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, true); }},
        {"reject", [](const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, false); }},
        {"selectattr", [](const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, true); }},
        {"rejectattr", [](const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, false); }},
        {"int", [](const Value& v, const CallArgs& a) {
             const Value* fallback = argument(a, 0, "default");
             const Value dflt = fallback ? *fallback : Value::from(std::int64_t{0});
             if (v.is_integral()) return Value::from(v.kind == Value::Kind::Bool ? std::int64_t{v.boolean} : v.integer);
             auto in_range = [](double d) { return std::isfinite(d) && std::fabs(d) < 9.2e18; };
             if (v.kind == Value::Kind::Float) return in_range(v.real) ? Value::from(static_cast<std::int64_t>(v.real)) : dflt;
             if (v.is_string()) {
                 const std::string s = strip(v.text, StripSide::Both);
                 try {
                     std::size_t used = 0;
                     const long long i = std::stoll(s, &used, 10);
                     if (used == s.size()) return Value::from(static_cast<std::int64_t>(i));
                     const double d = std::stod(s, &used);
                     if (used == s.size() && in_range(d)) return Value::from(static_cast<std::int64_t>(d));
                 } catch (const std::exception&) {
                 }
             }
             return dflt;
         }},
        {"float", [](const Value& v, const CallArgs& a) {
             const Value* fallback = argument(a, 0, "default");
             const Value dflt = fallback ? *fallback : Value::from(0.0);
             if (v.is_number()) return Value::from(v.as_double());
             if (v.is_string()) {
                 try {
                     std::size_t used = 0;
                     const std::string s = strip(v.text, StripSide::Both);
                     const double d = std::stod(s, &used);
                     if (used == s.size()) return Value::from(d);
                 } catch (const std::exception&) {
                 }
             }
             return dflt;
         }},
        {"abs", [](const Value& v, const CallArgs&) {
             if (v.kind == Value::Kind::Float) return Value::from(std::fabs(v.real));
             if (v.is_integral()) {
                 if (v.kind == Value::Kind::Int && v.integer == INT64_MIN) throw TemplateError("integer overflow in abs");
                 return Value::from(std::abs(v.kind == Value::Kind::Bool ? std::int64_t{v.boolean} : v.integer));
             }
             throw TemplateError("bad operand type for abs(): '" + v.type_name() + "'");
         }},
        {"round", [](const Value& v, const CallArgs& a) {
             if (!v.is_number()) throw TemplateError("round needs a number, got " + v.type_name());
             const Value* precision = argument(a, 0, "precision");
             const Value* method = argument(a, 1, "method");
             const std::int64_t digits = precision && precision->is_integral() ? precision->integer : 0;
             const std::string how = method ? method->str() : "common";
             const double scale = std::pow(10.0, static_cast<double>(digits));
             if (how == "ceil") return Value::from(std::ceil(v.as_double() * scale) / scale);
             if (how == "floor") return Value::from(std::floor(v.as_double() * scale) / scale);
             return Value::from(python_round(v.as_double(), digits));
         }},
        {"sum", [](const Value& v, const CallArgs& a) {
             const Value* attribute = argument(a, 0, "attribute");
             const Value* start = argument(a, 1, "start");
             bool integral = !start || start->is_integral();
             double total_d = start ? start->as_double() : 0;
             std::int64_t total_i = start && start->is_integral() ? start->integer : 0;
             for (const auto& item : iterate(v)) {
                 const Value x = attribute ? dotted(item, attribute->str()) : item;
                 if (!x.is_number()) throw TemplateError("sum needs numbers, got " + x.type_name());
                 integral = integral && x.is_integral();
                 total_d += x.as_double();
                 if (__builtin_add_overflow(total_i, x.kind == Value::Kind::Bool ? std::int64_t{x.boolean} : x.integer, &total_i))
                     throw TemplateError("integer overflow in sum");
             }
             return integral ? Value::from(total_i) : Value::from(total_d);
         }},
        {"max", [](const Value& v, const CallArgs& a) {
             const bool case_sensitive = flag(a, 0, "case_sensitive", false);
             const Value* attribute = argument(a, 1, "attribute");
             const auto items = iterate(v);
             if (items.empty()) return Value::undefined("max() of an empty sequence");
             auto key = [&](const Value& x) { return attribute ? dotted(x, attribute->str()) : x; };
             return *std::max_element(items.begin(), items.end(), [&](const Value& l, const Value& r) { return sort_less(key(l), key(r), case_sensitive); });
         }},
        {"min", [](const Value& v, const CallArgs& a) {
             const bool case_sensitive = flag(a, 0, "case_sensitive", false);
             const Value* attribute = argument(a, 1, "attribute");
             const auto items = iterate(v);
             if (items.empty()) return Value::undefined("min() of an empty sequence");
             auto key = [&](const Value& x) { return attribute ? dotted(x, attribute->str()) : x; };
             return *std::min_element(items.begin(), items.end(), [&](const Value& l, const Value& r) { return sort_less(key(l), key(r), case_sensitive); });
         }},
        {"indent", [](const Value& v, const CallArgs& a) {
             return Value::from(indent(v.str(), argument(a, 0, "width"), flag(a, 1, "first", false), flag(a, 2, "blank", false)));
         }},
        {"center", [](const Value& v, const CallArgs& a) {
             const Value* width = argument(a, 0, "width");
             const std::int64_t w = width && width->is_integral() ? width->integer : 80;
             if (w > (1 << 20)) throw TemplateError("center width larger than 1 MiB");
             const std::string s = v.str();
             const std::int64_t n = code_point_count(s);
             if (n >= w) return Value::from(s);
             // Python's str.center puts the odd space on the right unless both n and w are odd.
             const std::int64_t total = w - n;
             const std::int64_t left = total / 2 + (total & w & 1);
             return Value::from(std::string(static_cast<std::size_t>(left), ' ') + s +
                                std::string(static_cast<std::size_t>(total - left), ' '));
         }},
        {"wordcount", [](const Value& v, const CallArgs&) {
             return Value::from(static_cast<std::int64_t>(split(v.str(), nullptr, -1).size()));
         }},
        {"attr", [](const Value& v, const CallArgs& a) { return get_attribute(v, required_string(a, 0, "name", "attr")); }},
    };
    return table;
}

const FilterFn* find_filter(std::string_view name) {
    if (name == "count") name = "length";
    if (name == "d") name = "default";
    if (name == "e") name = "escape";
    for (const auto& [n, fn] : filter_table())
        if (n == name) return &fn;
    return nullptr;
}

bool numeric_equal(const Value& a, const Value& b) { return equal(a, b); }

}  // namespace

Value apply_filter(std::string_view name, const Value& input, const CallArgs& args) {
    const FilterFn* fn = find_filter(name);
    if (!fn) throw TemplateError("unknown filter '" + std::string(name) + "'");
    // Most filters treat an undefined input as an error in jinja2 (it raises when the filter
    // touches it); these are the ones that accept it.
    static const char* const kUndefinedOk[] = {"default", "length", "list", "items", "string", "trim", "upper",
                                               "lower", "join", "first", "last", "safe", "escape", "title",
                                               "capitalize", "reverse", "select", "reject", "selectattr",
                                               "rejectattr", "map", "unique", "sort", "wordcount", "indent",
                                               "center", "replace", "sum", "max", "min", "int", "float"};
    if (input.is_undefined() && std::none_of(std::begin(kUndefinedOk), std::end(kUndefinedOk), [&](const char* n) {
            return find_filter(n) == fn;
        }))
        throw TemplateError(input.text.empty() ? "filter '" + std::string(name) + "' got an undefined value" : input.text);
    return (*fn)(input, args);
}

bool apply_test(std::string_view name, const Value& v, const CallArgs& args) {
    using K = Value::Kind;
    const Value* arg = argument(args, 0, "");
    auto need_arg = [&]() -> const Value& {
        if (!arg) throw TemplateError("test '" + std::string(name) + "' needs an argument");
        return *arg;
    };
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.kind == K::Bool;
    if (name == "true") return v.kind == K::Bool && v.boolean;
    if (name == "false") return v.kind == K::Bool && !v.boolean;
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_number();
    if (name == "integer") return v.kind == K::Int;
    if (name == "float") return v.kind == K::Float;
    if (name == "mapping") return v.is_object();
    if (name == "iterable") return v.is_string() || v.is_array() || v.is_object();
    if (name == "sequence") return v.is_string() || v.is_array() || v.is_object();
    if (name == "callable") return v.kind == K::Callable;
    if (name == "odd" || name == "even" || name == "divisibleby") {
        if (!v.is_integral()) throw TemplateError("test '" + std::string(name) + "' needs an integer");
        const std::int64_t i = v.kind == K::Bool ? v.boolean : v.integer;
        if (name == "odd") return ((i % 2) + 2) % 2 == 1;
        if (name == "even") return i % 2 == 0;
        const Value& d = need_arg();
        if (!d.is_integral() || d.integer == 0) throw TemplateError("divisibleby needs a non-zero integer");
        return d.integer == -1 || i % d.integer == 0;
    }
    if (name == "eq" || name == "equalto" || name == "==") return numeric_equal(v, need_arg());
    if (name == "ne" || name == "!=") return !equal(v, need_arg());
    if (name == "lt" || name == "lessthan" || name == "<") return less(v, need_arg());
    if (name == "gt" || name == "greaterthan" || name == ">") return less(need_arg(), v);
    if (name == "le" || name == "<=") return !less(need_arg(), v);
    if (name == "ge" || name == ">=") return !less(v, need_arg());
    if (name == "in") return contains(need_arg(), v);
    if (name == "sameas") {
        const Value& o = need_arg();
        if (v.kind != o.kind) return false;
        switch (v.kind) {
            case K::Array: return v.array == o.array;
            case K::Object: return v.object == o.object;
            case K::Callable: return v.callable == o.callable;
            default: return equal(v, o);
        }
    }
    if (name == "lower" || name == "upper") {
        if (!v.is_string()) return false;
        const bool has_cased = std::any_of(v.text.begin(), v.text.end(), [](char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; });
        return has_cased && (name == "lower" ? ascii_lower(v.text) == v.text : ascii_upper(v.text) == v.text);
    }
    throw TemplateError("unknown test '" + std::string(name) + "'");
}

}  // namespace tokenscope::jinja
