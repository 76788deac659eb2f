#pragma once
// The parsed template: expressions and statements as plain tagged structs (the interpreter is a
// switch over the kind, which keeps every rule of the language in one readable place).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace tokenscope::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    enum class Kind {
        Literal,    // value
        Name,       // name
        Attribute,  // children[0].name
        Subscript,  // children[0][children[1]]
        Slice,      // children[0][a:b:c]; children[1..3] may be null
        Call,       // children[0](children[1..], named...)
        Filter,     // children[0] | name(children[1..], named...); children[0] null in a filter block
        Test,       // children[0] is [not] name(children[1..]); negated
        Unary,      // op children[0]: "-", "+", "not"
        Binary,     // children[0] op children[1]: + - * / // % ** ~ and or in "not in" == != < > <= >=
        Conditional,  // children[1] if children[0] else children[2] (children[2] may be null)
        List,       // [children...]
        Tuple,      // (children...)
        Dict,       // {children[0]: children[1], ...}
    };
    Kind kind;
    int line = 0;
    std::string name;  // Name, Attribute, Call/Filter/Test name, operator
    Value value;       // Literal
    bool negated = false;
    std::vector<ExprPtr> children;
    std::vector<std::pair<std::string, ExprPtr>> named;  // keyword arguments
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // may be null
};

struct Stmt {
    enum class Kind {
        Text,      // text
        Output,    // {{ expr }}
        If,        // conditions[i] -> bodies[i]; else_body
        For,       // for targets in expr [if filter]: body; else_body
        Set,       // set targets = expr; with `text` set: set targets[0].text = expr (namespace)
        SetBlock,  // {% set name %}body{% endset %}, optional filter expr
        Macro,     // name(params): body
        CallBlock, // {% call macro(...) %}body{% endcall %}: expr is the call, body is caller()
        FilterBlock,  // {% filter f %}body{% endfilter %}: expr is the filter chain
        Break,
        Continue,
        Do,        // {% do expr %}
        Scope,     // body in its own scope ({% generation %} and similar wrappers)
    };
    Kind kind;
    int line = 0;
    std::string text;                  // Text; Macro name; Set's namespace attribute
    std::vector<std::string> targets;  // For/Set names; SetBlock name
    ExprPtr expr;                      // Output, For iterable, Set value, Do, CallBlock, FilterBlock
    ExprPtr filter;                    // For's "if", SetBlock's filter
    std::vector<ExprPtr> conditions;   // If
    std::vector<StmtList> bodies;      // If branches
    StmtList body;
    StmtList else_body;
    std::vector<MacroParam> params;    // Macro
};

}  // namespace tokenscope::jinja
