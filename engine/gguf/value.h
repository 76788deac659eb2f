#pragma once
// GGUF metadata values: every scalar type, strings, and (nested) arrays.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace tokenscope::gguf {

enum class ValueType : std::uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

const char* value_type_name(ValueType type);
bool is_known_value_type(std::uint32_t id);

class Value;

struct Array {
    ValueType element_type = ValueType::UInt8;
    std::vector<Value> items;
};

// One metadata value. Integers are kept widened (uint64 / int64), floats as double; `type()`
// remembers the exact GGUF type so a value writes back byte for byte.
class Value {
  public:
    Value() = default;

    static Value u8(std::uint8_t v) { return Value(ValueType::UInt8, std::uint64_t{v}); }
    static Value i8(std::int8_t v) { return Value(ValueType::Int8, std::int64_t{v}); }
    static Value u16(std::uint16_t v) { return Value(ValueType::UInt16, std::uint64_t{v}); }
    static Value i16(std::int16_t v) { return Value(ValueType::Int16, std::int64_t{v}); }
    static Value u32(std::uint32_t v) { return Value(ValueType::UInt32, std::uint64_t{v}); }
    static Value i32(std::int32_t v) { return Value(ValueType::Int32, std::int64_t{v}); }
    static Value u64(std::uint64_t v) { return Value(ValueType::UInt64, v); }
    static Value i64(std::int64_t v) { return Value(ValueType::Int64, v); }
    static Value f32(float v) { return Value(ValueType::Float32, double{v}); }
    static Value f64(double v) { return Value(ValueType::Float64, v); }
    static Value boolean(bool v) { return Value(ValueType::Bool, v); }
    static Value string(std::string v) { return Value(ValueType::String, std::move(v)); }
    static Value array(Array v) { return Value(ValueType::Array, std::move(v)); }
    static Value strings(const std::vector<std::string>& items);
    static Value f32s(const std::vector<float>& items);
    static Value i32s(const std::vector<std::int32_t>& items);

    ValueType type() const { return type_; }
    bool is_integer() const;
    bool is_float() const { return type_ == ValueType::Float32 || type_ == ValueType::Float64; }

    // Typed access. Each throws InvalidArgument naming the actual type on a mismatch;
    // callers that know the key rethrow with it (see File::require_*).
    std::uint64_t as_uint() const;  // any integer type that is >= 0
    std::int64_t as_int() const;    // any integer type that fits int64
    double as_double() const;       // float or integer
    bool as_bool() const;
    const std::string& as_string() const;
    const Array& as_array() const;

    // Short human-readable rendering: scalars in full, arrays as "[type × n] first items…".
    std::string to_display_string(std::size_t max_items = 8) const;

    friend bool operator==(const Value&, const Value&) = default;

  private:
    using Storage =
        std::variant<std::monostate, std::uint64_t, std::int64_t, double, bool, std::string, Array>;
    Value(ValueType type, Storage storage) : type_(type), storage_(std::move(storage)) {}

    ValueType type_ = ValueType::UInt8;
    Storage storage_;
};

inline bool operator==(const Array& a, const Array& b) {
    return a.element_type == b.element_type && a.items == b.items;
}

}  // namespace tokenscope::gguf
