#pragma once
// Splits template source into text and tag tokens, applying Jinja's whitespace rules as
// Hugging Face configures them (trim_blocks and lstrip_blocks on, keep_trailing_newline off):
//   - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}", "-#}" after it.
//   - trim_blocks: the first newline after a block or comment tag is dropped ("+%}" keeps it).
//   - lstrip_blocks: spaces and tabs from the start of a line to a block or comment tag are
//     dropped ("{%+" keeps them). Expression tags "{{ }}" are never lstripped.
//   - a single newline at the very end of the template is dropped.
//   - "{% raw %}...{% endraw %}" is text.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokenscope::jinja {

struct Token {
    enum class Kind {
        Text,        // template text (value = the text after whitespace control)
        ExprBegin,   // {{
        ExprEnd,     // }}
        StmtBegin,   // {%
        StmtEnd,     // %}
        Name,        // identifier or keyword
        String,      // string literal (value = decoded text)
        Integer,
        Float,
        Operator,    // + - * / // % ** ~ == != < > <= >= = . , : | ( ) [ ] { }
        End,
    };
    Kind kind = Kind::End;
    std::string value;
    std::int64_t integer = 0;
    double real = 0;
    int line = 1;
};

// Throws TemplateError ("chat template line N: ...") for an unterminated tag, comment or
// string, or a character that starts no token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace tokenscope::jinja
