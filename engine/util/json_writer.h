#pragma once
// A small streaming JSON writer for the CLI's --json output (and later the bench and API).
// It tracks nesting so commas come out right; strings are escaped per RFC 8259 and
// invalid UTF-8 is replaced by U+FFFD so the output always parses.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokenscope {

class JsonWriter {
  public:
    JsonWriter& begin_object();
    JsonWriter& end_object();
    JsonWriter& begin_array();
    JsonWriter& end_array();
    JsonWriter& key(std::string_view name);
    JsonWriter& value(std::string_view text);
    JsonWriter& value(const char* text) { return value(std::string_view(text)); }
    JsonWriter& value(bool flag);
    JsonWriter& value(std::int64_t number);
    JsonWriter& value(std::uint64_t number);
    JsonWriter& value(int number) { return value(static_cast<std::int64_t>(number)); }
    JsonWriter& value(double number);  // NaN and infinities become null
    JsonWriter& null();

    const std::string& str() const { return out_; }

    static std::string escape(std::string_view text);

  private:
    void before_value();
    std::string out_;
    // One entry per open container: true once it holds an element.
    std::vector<bool> has_element_;
    bool after_key_ = false;
};

}  // namespace tokenscope
