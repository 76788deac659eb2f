#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/string_ops.h"

namespace tokenscope::jinja {

const Value* Object::find(std::string_view key) const {
    for (const auto& [k, v] : items)
        if (k == key) return &v;
    return nullptr;
}

void Object::set(std::string key, Value value) {
    for (auto& [k, v] : items) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::named_arg(std::string_view name) const {
    for (const auto& [k, v] : named)
        if (k == name) return &v;
    return nullptr;
}

Value Value::undefined(std::string name) {
    Value v;
    v.text = std::move(name);
    return v;
}

Value Value::none() {
    Value v;
    v.kind = Kind::None;
    return v;
}

Value Value::from(bool b) {
    Value v;
    v.kind = Kind::Bool;
    v.boolean = b;
    return v;
}

Value Value::from(std::int64_t i) {
    Value v;
    v.kind = Kind::Int;
    v.integer = i;
    return v;
}

Value Value::from(double d) {
    Value v;
    v.kind = Kind::Float;
    v.real = d;
    return v;
}

Value Value::from(std::string s) {
    Value v;
    v.kind = Kind::String;
    v.text = std::move(s);
    return v;
}

Value Value::from(jinja::Array a, bool tuple) {
    Value v;
    v.kind = Kind::Array;
    v.array = std::make_shared<jinja::Array>(std::move(a));
    v.is_tuple = tuple;
    return v;
}

Value Value::from(jinja::Object o) {
    Value v;
    v.kind = Kind::Object;
    v.object = std::make_shared<jinja::Object>(std::move(o));
    return v;
}

Value Value::function(std::string name, std::function<Value(const CallArgs&)> call) {
    Value v;
    v.kind = Kind::Callable;
    v.callable = std::make_shared<jinja::Callable>(jinja::Callable{std::move(name), std::move(call)});
    return v;
}

double Value::as_double() const {
    switch (kind) {
        case Kind::Bool: return boolean ? 1.0 : 0.0;
        case Kind::Int: return static_cast<double>(integer);
        case Kind::Float: return real;
        default: return 0.0;
    }
}

bool Value::truthy() const {
    switch (kind) {
        case Kind::Undefined:
        case Kind::None: return false;
        case Kind::Bool: return boolean;
        case Kind::Int: return integer != 0;
        case Kind::Float: return real != 0.0;
        case Kind::String: return !text.empty();
        case Kind::Array: return !array->empty();
        case Kind::Object: return object->is_namespace || !object->items.empty();
        case Kind::Callable: return true;
    }
    return false;
}

std::string python_float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
    // Shortest round-trip digits, then Python's layout rule (repr uses exponent notation when
    // the decimal exponent is < -4 or >= 16).
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    std::string sign;
    if (sci[0] == '-') {
        sign = "-";
        sci.erase(0, 1);
    }
    const auto e_at = sci.find('e');
    std::string digits = sci.substr(0, e_at);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    const int exponent = std::stoi(sci.substr(e_at + 1));
    if (exponent < -4 || exponent >= 16) {
        std::string out = sign + digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char exp[16];
        std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        return out + exp;
    }
    std::string out;
    if (exponent < 0) {
        out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<std::size_t>(exponent) + 1 >= digits.size()) {
        out = digits + std::string(static_cast<std::size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
        out = digits.substr(0, static_cast<std::size_t>(exponent) + 1) + "." +
              digits.substr(static_cast<std::size_t>(exponent) + 1);
    }
    return sign + out;
}

namespace {
std::string repr_string(const std::string& s) {
    // Python picks single quotes unless the text holds ' and no ".
    const bool has_single = s.find('\'') != std::string::npos;
    const bool has_double = s.find('"') != std::string::npos;
    const char quote = has_single && !has_double ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c == static_cast<unsigned char>(quote)) {
                    out += '\\';
                    out += static_cast<char>(c);
                } else if (c < 0x20 || c == 0x7F) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\x%02x", c);
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += quote;
    return out;
}
}  // namespace

std::string Value::str() const {
    switch (kind) {
        case Kind::Undefined: return {};
        case Kind::String: return text;
        default: return repr();
    }
}

std::string Value::repr() const {
    switch (kind) {
        case Kind::Undefined: return {};
        case Kind::None: return "None";
        case Kind::Bool: return boolean ? "True" : "False";
        case Kind::Int: return std::to_string(integer);
        case Kind::Float: return python_float_repr(real);
        case Kind::String: return repr_string(text);
        case Kind::Array: {
            std::string out = is_tuple ? "(" : "[";
            for (std::size_t i = 0; i < array->size(); ++i) {
                if (i) out += ", ";
                out += (*array)[i].repr();
            }
            if (is_tuple && array->size() == 1) out += ",";
            return out + (is_tuple ? ")" : "]");
        }
        case Kind::Object: {
            std::string out = object->is_namespace ? "<Namespace {" : "{";
            bool first = true;
            for (const auto& [k, v] : object->items) {
                if (!first) out += ", ";
                first = false;
                out += repr_string(k) + ": " + v.repr();
            }
            return out + (object->is_namespace ? "}>" : "}");
        }
        case Kind::Callable: return "<function " + callable->name + ">";
    }
    return {};
}

std::string Value::type_name() const {
    switch (kind) {
        case Kind::Undefined: return "undefined";
        case Kind::None: return "NoneType";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::Array: return is_tuple ? "tuple" : "list";
        case Kind::Object: return object->is_namespace ? "Namespace" : "dict";
        case Kind::Callable: return "function";
    }
    return "?";
}

bool equal(const Value& a, const Value& b) {
    using K = Value::Kind;
    if (a.is_number() && b.is_number()) {
        if (a.is_integral() && b.is_integral())
            return (a.kind == K::Bool ? a.boolean : a.integer) == (b.kind == K::Bool ? b.boolean : b.integer);
        return a.as_double() == b.as_double();
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case K::Undefined:
        case K::None: return true;
        case K::String: return a.text == b.text;
        case K::Array: {
            if (a.array->size() != b.array->size()) return false;
            for (std::size_t i = 0; i < a.array->size(); ++i)
                if (!equal((*a.array)[i], (*b.array)[i])) return false;
            return true;
        }
        case K::Object: {
            if (a.object == b.object) return true;
            if (a.object->items.size() != b.object->items.size()) return false;
            for (const auto& [k, v] : a.object->items) {
                const Value* other = b.object->find(k);
                if (!other || !equal(v, *other)) return false;
            }
            return true;
        }
        case K::Callable: return a.callable == b.callable;
        default: return false;
    }
}

bool less(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_integral() && b.is_integral()) {
            const auto x = a.kind == Value::Kind::Bool ? std::int64_t{a.boolean} : a.integer;
            const auto y = b.kind == Value::Kind::Bool ? std::int64_t{b.boolean} : b.integer;
            return x < y;
        }
        return a.as_double() < b.as_double();
    }
    // UTF-8 byte order is code point order, which is how Python compares str.
    if (a.is_string() && b.is_string()) return a.text < b.text;
    if (a.is_array() && b.is_array()) {
        const auto& x = *a.array;
        const auto& y = *b.array;
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (less(x[i], y[i])) return true;
            if (less(y[i], x[i])) return false;
        }
        return x.size() < y.size();
    }
    throw TemplateError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                        b.type_name() + "'");
}

}  // namespace tokenscope::jinja
