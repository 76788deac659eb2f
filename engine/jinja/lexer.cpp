#include "jinja/lexer.h"

#include <charconv>

#include "jinja/string_ops.h"
#include "jinja/value.h"
#include "util/utf8.h"

namespace tokenscope::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& what) {
    throw TemplateError("chat template line " + std::to_string(line) + ": " + what);
}

// Bytes of Python whitespace at the start of text[pos...].
std::size_t leading_space(std::string_view text, std::size_t pos) {
    std::size_t i = pos;
    while (i < text.size()) {
        const int len = utf8::sequence_length(text.substr(i));
        if (len <= 0) break;
        const auto cps = code_points(text.substr(i, static_cast<std::size_t>(len)));
        if (cps.empty() || !is_python_space(cps[0])) break;
        i += static_cast<std::size_t>(len);
    }
    return i - pos;
}

int count_lines(std::string_view text) {
    int n = 0;
    for (char c : text) n += c == '\n';
    return n;
}

std::string normalize_newlines(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    // keep_trailing_newline is off in Hugging Face's environment.
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
  public:
    explicit Lexer(std::string source) : src_(std::move(source)) {}

    std::vector<Token> run() {
        while (pos_ < src_.size()) {
            const std::size_t at = find_tag(pos_);
            if (at == std::string::npos) {
                emit_text(src_.substr(pos_));
                pos_ = src_.size();
                break;
            }
            const char type = src_[at + 1];
            const char mod = at + 2 < src_.size() ? src_[at + 2] : '\0';
            std::string text = src_.substr(pos_, at - pos_);
            if (mod == '-') {
                text = strip(text, StripSide::Right);
            } else if (mod != '+' && type != '{') {
                // lstrip_blocks: drop the line's leading whitespace when the tag is the first
                // thing on its line (or follows a tag whose end consumed a newline).
                const std::size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
                if ((line_start > 0 || line_starting_) &&
                    strip(std::string_view(text).substr(line_start), StripSide::Both).empty())
                    text.resize(line_start);
            }
            line_ += count_lines(std::string_view(src_).substr(pos_, at - pos_));
            emit_text(std::move(text));
            pos_ = at + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
            if (type == '#') {
                comment();
            } else {
                tag(type == '{');
            }
        }
        tokens_.push_back(Token{Token::Kind::End, {}, 0, 0, line_});
        return std::move(tokens_);
    }

  private:
    std::size_t find_tag(std::size_t from) const {
        for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
            if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        }
        return std::string::npos;
    }

    void emit_text(std::string text) {
        if (text.empty()) return;
        tokens_.push_back(Token{Token::Kind::Text, std::move(text), 0, 0, line_});
    }

    // After a closing delimiter ending at pos_: '-' strips all whitespace, a block/comment tag
    // drops one newline (trim_blocks) unless '+'.
    void after_close(char mod, bool trim_newline) {
        const std::size_t start = pos_;
        if (mod == '-') {
            pos_ += leading_space(src_, pos_);
        } else if (mod != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
            ++pos_;
        }
        line_ += count_lines(std::string_view(src_).substr(start, pos_ - start));
        line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
    }

    void comment() {
        const std::size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) fail(line_, "unterminated comment '{#'");
        const char mod = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
        line_ += count_lines(std::string_view(src_).substr(pos_, end - pos_));
        pos_ = end + 2;
        after_close(mod, true);
    }

    void tag(bool expression) {
        const std::size_t first_token = tokens_.size();
        const int open_line = line_;
        tokens_.push_back(Token{expression ? Token::Kind::ExprBegin : Token::Kind::StmtBegin, {}, 0, 0, line_});
        std::vector<char> brackets;
        for (;;) {
            skip_tag_space();
            if (pos_ >= src_.size())
                fail(open_line, expression ? "unterminated '{{'" : "unterminated '{%'");
            if (brackets.empty()) {
                const char close = expression ? '}' : '%';
                char mod = '\0';
                std::size_t p = pos_;
                if ((src_[p] == '-' || src_[p] == '+') && p + 2 < src_.size() + 1 && src_.compare(p + 1, 2, std::string{close, '}'}) == 0) {
                    mod = src_[p];
                    ++p;
                }
                if (src_.compare(p, 2, std::string{close, '}'}) == 0) {
                    pos_ = p + 2;
                    tokens_.push_back(Token{expression ? Token::Kind::ExprEnd : Token::Kind::StmtEnd, {}, 0, 0, line_});
                    after_close(mod, !expression);
                    if (!expression) maybe_raw(first_token);
                    return;
                }
            }
            lex_one(brackets);
        }
    }

    void skip_tag_space() {
        while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\n')) {
            line_ += src_[pos_] == '\n';
            ++pos_;
        }
    }

    void lex_one(std::vector<char>& brackets) {
        const char c = src_[pos_];
        if (c == '\'' || c == '"') return string_literal(c);
        const bool after_dot = !tokens_.empty() && tokens_.back().kind == Token::Kind::Operator && tokens_.back().value == ".";
        if (is_digit(c)) return number(after_dot);
        if (is_name_start(c)) {
            std::size_t end = pos_;
            while (end < src_.size() && is_name_char(src_[end])) ++end;
            tokens_.push_back(Token{Token::Kind::Name, src_.substr(pos_, end - pos_), 0, 0, line_});
            pos_ = end;
            return;
        }
        static const char* const kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
        for (const char* op : kTwoChar) {
            if (src_.compare(pos_, 2, op) == 0) {
                tokens_.push_back(Token{Token::Kind::Operator, op, 0, 0, line_});
                pos_ += 2;
                return;
            }
        }
        static const std::string kOneChar = "+-*/%~<>=.,:|()[]{}";
        if (kOneChar.find(c) == std::string::npos) fail(line_, std::string("unexpected character '") + c + "' in a tag");
        if (c == '(' || c == '[' || c == '{') brackets.push_back(c);
        if (c == ')' || c == ']' || c == '}') {
            const char want = c == ')' ? '(' : c == ']' ? '[' : '{';
            if (brackets.empty() || brackets.back() != want) fail(line_, std::string("unexpected '") + c + "'");
            brackets.pop_back();
        }
        tokens_.push_back(Token{Token::Kind::Operator, std::string(1, c), 0, 0, line_});
        ++pos_;
    }

    void string_literal(char quote) {
        const int start_line = line_;
        ++pos_;
        std::string out;
        for (;;) {
            if (pos_ >= src_.size()) fail(start_line, "unterminated string literal");
            const char c = src_[pos_++];
            if (c == quote) break;
            if (c == '\n') ++line_;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= src_.size()) fail(start_line, "unterminated string literal");
            const char e = src_[pos_++];
            // Python's unicode-escape rules, which Jinja applies to string literals.
            switch (e) {
                case 'n': out += '\n'; break;
                case 't': out += '\t'; break;
                case 'r': out += '\r'; break;
                case '\\': out += '\\'; break;
                case '\'': out += '\''; break;
                case '"': out += '"'; break;
                case 'a': out += '\a'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'v': out += '\v'; break;
                case '\n': ++line_; break;  // line continuation
                case 'x':
                case 'u':
                case 'U': {
                    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    if (pos_ + static_cast<std::size_t>(digits) > src_.size()) fail(line_, "truncated \\" + std::string(1, e) + " escape");
                    unsigned cp = 0;
                    const auto r = std::from_chars(src_.data() + pos_, src_.data() + pos_ + digits, cp, 16);
                    if (r.ptr != src_.data() + pos_ + digits) fail(line_, "bad \\" + std::string(1, e) + " escape");
                    pos_ += static_cast<std::size_t>(digits);
                    append_utf8(out, static_cast<char32_t>(cp));
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        unsigned cp = static_cast<unsigned>(e - '0');
                        for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k)
                            cp = cp * 8 + static_cast<unsigned>(src_[pos_++] - '0');
                        append_utf8(out, static_cast<char32_t>(cp));
                    } else {
                        out += '\\';  // unknown escapes stay as written
                        out += e;
                    }
            }
        }
        tokens_.push_back(Token{Token::Kind::String, std::move(out), 0, 0, start_line});
    }

    void number(bool integer_only) {
        std::size_t end = pos_;
        auto digits = [&] {
            while (end < src_.size() && (is_digit(src_[end]) || (src_[end] == '_' && end + 1 < src_.size() && is_digit(src_[end + 1])))) ++end;
        };
        digits();
        bool is_float = false;
        if (!integer_only && end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
            is_float = true;
            ++end;
            digits();
        }
        if (!integer_only && end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
            std::size_t e = end + 1;
            if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
            if (e < src_.size() && is_digit(src_[e])) {
                is_float = true;
                end = e;
                digits();
            }
        }
        std::string text;
        for (std::size_t i = pos_; i < end; ++i)
            if (src_[i] != '_') text += src_[i];
        Token t{is_float ? Token::Kind::Float : Token::Kind::Integer, text, 0, 0, line_};
        if (is_float) {
            std::from_chars(text.data(), text.data() + text.size(), t.real);
        } else if (std::from_chars(text.data(), text.data() + text.size(), t.integer).ec != std::errc()) {
            fail(line_, "integer literal out of range: " + text);
        }
        tokens_.push_back(std::move(t));
        pos_ = end;
    }

    // "{% raw %}" makes everything up to "{% endraw %}" plain text.
    void maybe_raw(std::size_t first) {
        if (tokens_.size() != first + 3 || tokens_[first + 1].kind != Token::Kind::Name ||
            tokens_[first + 1].value != "raw")
            return;
        const int line = tokens_[first].line;
        tokens_.resize(first);
        std::size_t search = pos_;
        for (;;) {
            const std::size_t at = src_.find("{%", search);
            if (at == std::string::npos) fail(line, "'{% raw %}' without '{% endraw %}'");
            std::size_t p = at + 2;
            const char open_mod = p < src_.size() ? src_[p] : '\0';
            if (open_mod == '-' || open_mod == '+') ++p;
            while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n')) ++p;
            if (src_.compare(p, 6, "endraw") != 0) {
                search = at + 2;
                continue;
            }
            p += 6;
            while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n')) ++p;
            char close_mod = '\0';
            if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) close_mod = src_[p++];
            if (src_.compare(p, 2, "%}") != 0) fail(line, "malformed '{% endraw %}'");
            std::string text = src_.substr(pos_, at - pos_);
            if (open_mod == '-') text = strip(text, StripSide::Right);
            line_ += count_lines(std::string_view(src_).substr(pos_, p + 2 - pos_));
            if (!text.empty()) tokens_.push_back(Token{Token::Kind::Text, std::move(text), 0, 0, line});
            pos_ = p + 2;
            after_close(close_mod, true);
            return;
        }
    }

    std::string src_;
    std::size_t pos_ = 0;
    int line_ = 1;
    bool line_starting_ = true;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace tokenscope::jinja
