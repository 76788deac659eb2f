#include "gguf/value.h"

#include <cstdio>

#include "util/error.h"

namespace tokenscope::gguf {

const char* value_type_name(ValueType type) {
    switch (type) {
        case ValueType::UInt8:
            return "uint8";
        case ValueType::Int8:
            return "int8";
        case ValueType::UInt16:
            return "uint16";
        case ValueType::Int16:
            return "int16";
        case ValueType::UInt32:
            return "uint32";
        case ValueType::Int32:
            return "int32";
        case ValueType::Float32:
            return "float32";
        case ValueType::Bool:
            return "bool";
        case ValueType::String:
            return "string";
        case ValueType::Array:
            return "array";
        case ValueType::UInt64:
            return "uint64";
        case ValueType::Int64:
            return "int64";
        case ValueType::Float64:
            return "float64";
    }
    return "unknown";
}

bool is_known_value_type(std::uint32_t id) {
    return id <= 12;
}

Value Value::strings(const std::vector<std::string>& items) {
    Array array{ValueType::String, {}};
    array.items.reserve(items.size());
    for (const auto& item : items) array.items.push_back(Value::string(item));
    return Value::array(std::move(array));
}

Value Value::f32s(const std::vector<float>& items) {
    Array array{ValueType::Float32, {}};
    array.items.reserve(items.size());
    for (float item : items) array.items.push_back(Value::f32(item));
    return Value::array(std::move(array));
}

Value Value::i32s(const std::vector<std::int32_t>& items) {
    Array array{ValueType::Int32, {}};
    array.items.reserve(items.size());
    for (std::int32_t item : items) array.items.push_back(Value::i32(item));
    return Value::array(std::move(array));
}

bool Value::is_integer() const {
    switch (type_) {
        case ValueType::UInt8:
        case ValueType::Int8:
        case ValueType::UInt16:
        case ValueType::Int16:
        case ValueType::UInt32:
        case ValueType::Int32:
        case ValueType::UInt64:
        case ValueType::Int64:
            return true;
        default:
            return false;
    }
}

namespace {
[[noreturn]] void mismatch(const char* wanted, ValueType actual) {
    throw InvalidArgument(std::string("expected ") + wanted + ", found " + value_type_name(actual));
}
}  // namespace

std::uint64_t Value::as_uint() const {
    if (const auto* u = std::get_if<std::uint64_t>(&storage_)) return *u;
    if (const auto* i = std::get_if<std::int64_t>(&storage_)) {
        if (*i < 0)
            throw InvalidArgument("expected a non-negative integer, found " + std::to_string(*i));
        return static_cast<std::uint64_t>(*i);
    }
    mismatch("an unsigned integer", type_);
}

std::int64_t Value::as_int() const {
    if (const auto* i = std::get_if<std::int64_t>(&storage_)) return *i;
    if (const auto* u = std::get_if<std::uint64_t>(&storage_)) {
        if (*u > static_cast<std::uint64_t>(INT64_MAX)) {
            throw InvalidArgument("integer " + std::to_string(*u) + " does not fit int64");
        }
        return static_cast<std::int64_t>(*u);
    }
    mismatch("an integer", type_);
}

double Value::as_double() const {
    if (const auto* d = std::get_if<double>(&storage_)) return *d;
    if (const auto* u = std::get_if<std::uint64_t>(&storage_)) return static_cast<double>(*u);
    if (const auto* i = std::get_if<std::int64_t>(&storage_)) return static_cast<double>(*i);
    mismatch("a number", type_);
}

bool Value::as_bool() const {
    if (const auto* b = std::get_if<bool>(&storage_)) return *b;
    mismatch("a bool", type_);
}

const std::string& Value::as_string() const {
    if (const auto* s = std::get_if<std::string>(&storage_)) return *s;
    mismatch("a string", type_);
}

const Array& Value::as_array() const {
    if (const auto* a = std::get_if<Array>(&storage_)) return *a;
    mismatch("an array", type_);
}

std::string Value::to_display_string(std::size_t max_items) const {
    switch (type_) {
        case ValueType::String:
            return as_string();
        case ValueType::Bool:
            return as_bool() ? "true" : "false";
        case ValueType::Float32:
        case ValueType::Float64: {
            char buffer[32];
            std::snprintf(buffer, sizeof buffer, "%.9g", as_double());
            return buffer;
        }
        case ValueType::Array: {
            const Array& array = as_array();
            std::string out = std::string("[") + value_type_name(array.element_type) + " x " +
                              std::to_string(array.items.size()) + "]";
            const std::size_t shown = std::min(max_items, array.items.size());
            for (std::size_t i = 0; i < shown; ++i) {
                out += i == 0 ? " " : ", ";
                const Value& item = array.items[i];
                out += item.type() == ValueType::String ? "'" + item.as_string() + "'"
                                                        : item.to_display_string(max_items);
            }
            if (shown < array.items.size()) out += ", ...";
            return out;
        }
        default:
            if (std::holds_alternative<std::uint64_t>(storage_)) return std::to_string(as_uint());
            return std::to_string(as_int());
    }
}

}  // namespace tokenscope::gguf
