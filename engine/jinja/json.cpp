#include "jinja/json.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "jinja/string_ops.h"

namespace tokenscope::jinja {

namespace {

class JsonParser {
  public:
    explicit JsonParser(std::string_view text) : text_(text) {}

    Value document() {
        Value v = value(0);
        skip_space();
        if (pos_ != text_.size()) fail("unexpected text after the value");
        return v;
    }

  private:
    [[noreturn]] void fail(const std::string& what) const {
        throw TemplateError("JSON: " + what + " at byte " + std::to_string(pos_));
    }

    void skip_space() {
        while (pos_ < text_.size() &&
               (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
            ++pos_;
    }

    bool consume(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    Value value(int depth) {
        // Deep nesting would only come from hostile input; stop well before the stack does.
        if (depth > 512) fail("nesting deeper than 512");
        skip_space();
        if (pos_ >= text_.size()) fail("unexpected end of input");
        const char c = text_[pos_];
        if (c == '{') return object(depth);
        if (c == '[') return array(depth);
        if (c == '"') return Value::from(string());
        if (consume("true")) return Value::from(true);
        if (consume("false")) return Value::from(false);
        if (consume("null")) return Value::none();
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        fail(std::string("unexpected character '") + c + "'");
    }

    Value object(int depth) {
        ++pos_;
        Object obj;
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == '}') {
            ++pos_;
            return Value::from(std::move(obj));
        }
        for (;;) {
            skip_space();
            if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key");
            std::string key = string();
            skip_space();
            if (!consume(":")) fail("expected ':'");
            obj.set(std::move(key), value(depth + 1));
            skip_space();
            if (consume(",")) continue;
            if (consume("}")) return Value::from(std::move(obj));
            fail("expected ',' or '}'");
        }
    }

    Value array(int depth) {
        ++pos_;
        Array arr;
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == ']') {
            ++pos_;
            return Value::from(std::move(arr));
        }
        for (;;) {
            arr.push_back(value(depth + 1));
            skip_space();
            if (consume(",")) continue;
            if (consume("]")) return Value::from(std::move(arr));
            fail("expected ',' or ']'");
        }
    }

    unsigned hex4() {
        if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
            const char h = text_[pos_++];
            v <<= 4;
            if (h >= '0' && h <= '9') v |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') v |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') v |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad hex digit in \\u escape");
        }
        return v;
    }

    std::string string() {
        ++pos_;  // opening quote
        std::string out;
        for (;;) {
            if (pos_ >= text_.size()) fail("unterminated string");
            const char c = text_[pos_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= text_.size()) fail("unterminated escape");
            const char e = text_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    char32_t cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
                        pos_ += 2;
                        const unsigned low = hex4();
                        if (low >= 0xDC00 && low < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        else fail("unpaired surrogate");
                    } else if (cp >= 0xD800 && cp < 0xE000) {
                        fail("unpaired surrogate");
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: fail(std::string("bad escape '\\") + e + "'");
            }
        }
    }

    Value number() {
        const std::size_t start = pos_;
        if (text_[pos_] == '-') ++pos_;
        bool is_float = false;
        while (pos_ < text_.size()) {
            const char c = text_[pos_];
            if (c >= '0' && c <= '9') {
                ++pos_;
            } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                is_float = true;
                ++pos_;
            } else {
                break;
            }
        }
        const std::string_view digits = text_.substr(start, pos_ - start);
        if (!is_float) {
            std::int64_t i = 0;
            const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), i);
            if (r.ec == std::errc() && r.ptr == digits.data() + digits.size()) return Value::from(i);
        }
        double d = 0;
        const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), d);
        if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) {
            pos_ = start;
            fail("bad number '" + std::string(digits) + "'");
        }
        return Value::from(d);
    }

    std::string_view text_;
    std::size_t pos_ = 0;
};

void write_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    auto escape_code = [&out](unsigned cp) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
        out += buf;
    };
    for (const char32_t cp : code_points(s)) {
        switch (cp) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
                    if (cp >= 0x10000) {
                        const unsigned v = static_cast<unsigned>(cp) - 0x10000;
                        escape_code(0xD800 + (v >> 10));
                        escape_code(0xDC00 + (v & 0x3FF));
                    } else {
                        escape_code(static_cast<unsigned>(cp));
                    }
                } else {
                    append_utf8(out, cp);
                }
        }
    }
    out += '"';
}

void write(std::string& out, const Value& v, const JsonStyle& style, int level) {
    const std::string item_sep = style.item_separator.value_or(style.indent ? "," : ", ");
    const std::string key_sep = style.key_separator.value_or(": ");
    auto newline = [&](int lvl) {
        if (!style.indent) return;
        out += '\n';
        out.append(static_cast<std::size_t>(*style.indent * lvl), ' ');
    };
    switch (v.kind) {
        case Value::Kind::None: out += "null"; return;
        case Value::Kind::Bool: out += v.boolean ? "true" : "false"; return;
        case Value::Kind::Int: out += std::to_string(v.integer); return;
        case Value::Kind::Float: {
            const std::string r = python_float_repr(v.real);
            out += r == "nan" ? "NaN" : r == "inf" ? "Infinity" : r == "-inf" ? "-Infinity" : r;
            return;
        }
        case Value::Kind::String: write_string(out, v.text, style.ensure_ascii); return;
        case Value::Kind::Array: {
            if (v.array->empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (std::size_t i = 0; i < v.array->size(); ++i) {
                if (i) out += item_sep;
                newline(level + 1);
                write(out, (*v.array)[i], style, level + 1);
            }
            newline(level);
            out += ']';
            return;
        }
        case Value::Kind::Object: {
            if (v.object->items.empty()) {
                out += "{}";
                return;
            }
            std::vector<const std::pair<std::string, Value>*> items;
            for (const auto& item : v.object->items) items.push_back(&item);
            if (style.sort_keys)
                std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
            out += '{';
            bool first = true;
            for (const auto* item : items) {
                if (!first) out += item_sep;
                first = false;
                newline(level + 1);
                write_string(out, item->first, style.ensure_ascii);
                out += key_sep;
                write(out, item->second, style, level + 1);
            }
            newline(level);
            out += '}';
            return;
        }
        case Value::Kind::Undefined:
        case Value::Kind::Callable:
            throw TemplateError("Object of type " + v.type_name() + " is not JSON serializable");
    }
}

}  // namespace

Value parse_json(std::string_view text) { return JsonParser(text).document(); }

std::string to_json(const Value& value, const JsonStyle& style) {
    std::string out;
    write(out, value, style, 0);
    return out;
}

}  // namespace tokenscope::jinja
