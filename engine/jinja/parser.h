#pragma once
// Recursive-descent parser for the Jinja subset chat templates use. Operator precedence follows
// Jinja2's parser (lowest first): "x if c else y", or, and, not, comparisons and in, + -, ~,
// * / // %, **, unary - +, then postfix (.attr, [i], [a:b:c], call) and filters/tests, which bind
// to the unary expression before them ("-x|abs" is "(-x)|abs", "not x is y" is "not (x is y)").
#include <string_view>

#include "jinja/ast.h"

namespace tokenscope::jinja {

// Throws TemplateError naming the line and the problem ("chat template line 3: unknown tag
// 'include'", "... expected '%}' but found 'x'").
StmtList parse_template(std::string_view source);

}  // namespace tokenscope::jinja
