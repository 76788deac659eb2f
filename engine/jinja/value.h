#pragma once
// The values a chat template computes with, modelled on the Python objects Jinja2 works on
// (Hugging Face renders chat templates with Python's jinja2, and that output is what we must
// reproduce byte for byte): undefined, None, bool, int, float, str, list, dict, callables.
//
// Lists and dicts are shared by reference (shared_ptr) as in Python, which is what lets a
// `namespace()` object be changed inside a loop and seen after it. Dicts keep insertion order
// (Python 3.7+ dicts do, and tojson/items() output depends on it). Strings are UTF-8; where
// Python counts code points (len, indexing, slicing) the helpers in string_ops.h do too.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/error.h"

namespace tokenscope::jinja {

// A template that cannot be parsed or rendered: one line, "chat template line N: ...".
class TemplateError : public InvalidArgument {
  public:
    using InvalidArgument::InvalidArgument;
};

struct Value;
using Array = std::vector<Value>;

struct Object {
    std::vector<std::pair<std::string, Value>> items;
    bool is_namespace = false;  // made by namespace(): attributes may be assigned

    const Value* find(std::string_view key) const;
    void set(std::string key, Value value);
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> named;
    const Value* named_arg(std::string_view name) const;
};

struct Callable {
    std::string name;
    std::function<Value(const CallArgs&)> call;
};

struct Value {
    enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Callable };

    Kind kind = Kind::Undefined;
    bool boolean = false;
    std::int64_t integer = 0;
    double real = 0;
    std::string text;         // String; for Undefined, why ("'x' is undefined"), for errors
    bool is_tuple = false;    // Array built from a tuple literal or items(): repr uses ( )
    std::shared_ptr<jinja::Array> array;
    std::shared_ptr<jinja::Object> object;
    std::shared_ptr<jinja::Callable> callable;

    static Value undefined(std::string name = {});
    static Value none();
    static Value from(bool b);
    static Value from(std::int64_t i);
    static Value from(int i) { return from(static_cast<std::int64_t>(i)); }
    static Value from(double d);
    static Value from(std::string s);
    static Value from(std::string_view s) { return from(std::string(s)); }
    static Value from(const char* s) { return from(std::string(s)); }
    static Value from(jinja::Array a, bool tuple = false);
    static Value from(jinja::Object o);
    static Value function(std::string name, std::function<Value(const CallArgs&)> call);

    bool is_undefined() const { return kind == Kind::Undefined; }
    bool is_none() const { return kind == Kind::None; }
    bool is_string() const { return kind == Kind::String; }
    bool is_array() const { return kind == Kind::Array; }
    bool is_object() const { return kind == Kind::Object; }
    bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
    bool is_integral() const { return kind == Kind::Int || kind == Kind::Bool; }
    double as_double() const;

    // Python truthiness: empty str/list/dict, 0, None and undefined are false.
    bool truthy() const;
    // Python str(): what {{ value }} prints. Undefined prints nothing; None prints "None".
    std::string str() const;
    // Python repr(): how a value prints inside a printed list or dict ('a', not a).
    std::string repr() const;
    // Python type name for error messages ("str", "list", "NoneType", "undefined").
    std::string type_name() const;
};

// Python ==: numbers compare by value across bool/int/float, lists and dicts element-wise.
bool equal(const Value& a, const Value& b);
// Python <: numbers, strings (by code point), lists (lexicographic). Throws TemplateError for
// types Python cannot order.
bool less(const Value& a, const Value& b);

// Python's repr(float): the shortest text that reads back as the same double, positional
// between 1e-4 and 1e16, else "1e+16" style.
std::string python_float_repr(double d);

}  // namespace tokenscope::jinja
