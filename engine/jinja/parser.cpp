#include "jinja/parser.h"

#include <initializer_list>

#include "jinja/lexer.h"

namespace tokenscope::jinja {

namespace {

using TK = Token::Kind;

ExprPtr make(Expr::Kind kind, int line, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    return e;
}

class Parser {
  public:
    explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

    StmtList document() {
        std::string ended_by;
        StmtList body = statements({}, ended_by);
        return body;
    }

  private:
    // ---- token helpers ----
    const Token& cur() const { return t_[i_]; }
    const Token& peek(std::size_t ahead = 1) const {
        return t_[std::min(i_ + ahead, t_.size() - 1)];
    }
    bool is_op(std::string_view op) const { return cur().kind == TK::Operator && cur().value == op; }
    bool is_name(std::string_view name) const { return cur().kind == TK::Name && cur().value == name; }
    void advance() {
        if (i_ + 1 < t_.size()) ++i_;
    }

    static std::string describe(const Token& t) {
        switch (t.kind) {
            case TK::Text: return "template text";
            case TK::ExprBegin: return "'{{'";
            case TK::ExprEnd: return "'}}'";
            case TK::StmtBegin: return "'{%'";
            case TK::StmtEnd: return "'%}'";
            case TK::String: return "string '" + t.value + "'";
            case TK::End: return "end of template";
            default: return "'" + t.value + "'";
        }
    }

    [[noreturn]] void fail(const std::string& what) const {
        throw TemplateError("chat template line " + std::to_string(cur().line) + ": " + what);
    }
    [[noreturn]] void expected(const std::string& what) const {
        fail("expected " + what + " but found " + describe(cur()));
    }
    void expect_op(std::string_view op) {
        if (!is_op(op)) expected("'" + std::string(op) + "'");
        advance();
    }
    void expect_name(std::string_view name) {
        if (!is_name(name)) expected("'" + std::string(name) + "'");
        advance();
    }
    std::string identifier() {
        if (cur().kind != TK::Name) expected("a name");
        std::string n = cur().value;
        advance();
        return n;
    }
    void expect_stmt_end() {
        if (cur().kind != TK::StmtEnd) expected("'%}'");
        advance();
    }

    // ---- statements ----

    // Parses until a "{% <one of end_names> ..." tag; leaves the cursor on that keyword and
    // returns it in ended_by. With no end_names, parses to the end of the template.
    StmtList statements(std::initializer_list<std::string_view> end_names, std::string& ended_by) {
        StmtList out;
        for (;;) {
            const Token& t = cur();
            if (t.kind == TK::End) {
                if (end_names.size() == 0) return out;
                std::string list;
                for (auto n : end_names) list += (list.empty() ? "'" : " or '") + std::string(n) + "'";
                fail("template ended where " + list + " was expected");
            }
            if (t.kind == TK::Text) {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Text;
                s->line = t.line;
                s->text = t.value;
                out.push_back(std::move(s));
                advance();
                continue;
            }
            if (t.kind == TK::ExprBegin) {
                advance();
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Output;
                s->line = t.line;
                s->expr = tuple_or_expression();
                if (cur().kind != TK::ExprEnd) expected("'}}'");
                advance();
                out.push_back(std::move(s));
                continue;
            }
            if (t.kind != TK::StmtBegin) expected("text or a tag");
            advance();
            if (cur().kind == TK::Name) {
                for (auto n : end_names) {
                    if (cur().value == n) {
                        ended_by = cur().value;
                        return out;
                    }
                }
            }
            out.push_back(statement());
        }
    }

    std::unique_ptr<Stmt> statement() {
        if (cur().kind != TK::Name) expected("a statement name");
        const std::string keyword = cur().value;
        const int line = cur().line;
        advance();
        auto s = std::make_unique<Stmt>();
        s->line = line;
        std::string ended_by;
        if (keyword == "if") {
            s->kind = Stmt::Kind::If;
            s->conditions.push_back(tuple_or_expression());
            expect_stmt_end();
            for (;;) {
                s->bodies.push_back(statements({"elif", "else", "endif"}, ended_by));
                advance();
                if (ended_by == "elif") {
                    s->conditions.push_back(tuple_or_expression());
                    expect_stmt_end();
                } else if (ended_by == "else") {
                    expect_stmt_end();
                    s->else_body = statements({"endif"}, ended_by);
                    advance();
                    expect_stmt_end();
                    break;
                } else {
                    expect_stmt_end();
                    break;
                }
            }
        } else if (keyword == "for") {
            s->kind = Stmt::Kind::For;
            s->targets = assign_names();
            expect_name("in");
            s->expr = tuple_or_expression(/*allow_condexpr=*/false);
            if (is_name("if")) {
                advance();
                s->filter = expression();
            }
            if (is_name("recursive")) fail("recursive loops are not supported");
            expect_stmt_end();
            s->body = statements({"else", "endfor"}, ended_by);
            advance();
            expect_stmt_end();
            if (ended_by == "else") {
                s->else_body = statements({"endfor"}, ended_by);
                advance();
                expect_stmt_end();
            }
        } else if (keyword == "set") {
            if (cur().kind == TK::Name && peek().kind == TK::Operator && peek().value == ".") {
                // {% set ns.attr = value %}
                s->kind = Stmt::Kind::Set;
                s->targets.push_back(identifier());
                advance();  // '.'
                s->text = identifier();
                expect_op("=");
                s->expr = tuple_or_expression();
                expect_stmt_end();
            } else {
                s->targets = assign_names();
                if (is_op("=")) {
                    advance();
                    s->kind = Stmt::Kind::Set;
                    s->expr = tuple_or_expression();
                    expect_stmt_end();
                } else {
                    s->kind = Stmt::Kind::SetBlock;
                    if (s->targets.size() != 1) fail("a block set assigns one name");
                    if (is_op("|")) s->filter = filter_chain(nullptr);
                    expect_stmt_end();
                    s->body = statements({"endset"}, ended_by);
                    advance();
                    expect_stmt_end();
                }
            }
        } else if (keyword == "macro") {
            s->kind = Stmt::Kind::Macro;
            s->text = identifier();
            expect_op("(");
            while (!is_op(")")) {
                MacroParam p;
                p.name = identifier();
                if (is_op("=")) {
                    advance();
                    p.default_value = expression();
                }
                s->params.push_back(std::move(p));
                if (!is_op(",")) break;
                advance();
            }
            expect_op(")");
            expect_stmt_end();
            s->body = statements({"endmacro"}, ended_by);
            advance();
            expect_stmt_end();
        } else if (keyword == "call") {
            s->kind = Stmt::Kind::CallBlock;
            s->expr = expression();
            if (s->expr->kind != Expr::Kind::Call) fail("'call' needs a macro call");
            expect_stmt_end();
            s->body = statements({"endcall"}, ended_by);
            advance();
            expect_stmt_end();
        } else if (keyword == "filter") {
            s->kind = Stmt::Kind::FilterBlock;
            s->expr = filter_chain(nullptr, /*leading_bar=*/false);
            expect_stmt_end();
            s->body = statements({"endfilter"}, ended_by);
            advance();
            expect_stmt_end();
        } else if (keyword == "break" || keyword == "continue") {
            s->kind = keyword == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
            expect_stmt_end();
        } else if (keyword == "do") {
            s->kind = Stmt::Kind::Do;
            s->expr = tuple_or_expression();
            expect_stmt_end();
        } else if (keyword == "generation") {
            // Hugging Face's extension marking the assistant's part of the prompt (for training
            // masks); it renders its body unchanged.
            s->kind = Stmt::Kind::Scope;
            expect_stmt_end();
            s->body = statements({"endgeneration"}, ended_by);
            advance();
            expect_stmt_end();
        } else {
            --i_;
            fail("unknown tag '" + keyword + "'");
        }
        return s;
    }

    std::vector<std::string> assign_names() {
        std::vector<std::string> names;
        const bool paren = is_op("(");
        if (paren) advance();
        names.push_back(identifier());
        while (is_op(",")) {
            advance();
            if (cur().kind != TK::Name) break;
            names.push_back(identifier());
        }
        if (paren) expect_op(")");
        return names;
    }

    // ---- expressions ----

    // "a, b" at the top of an output or set makes a tuple.
    ExprPtr tuple_or_expression(bool allow_condexpr = true) {
        const int line = cur().line;
        ExprPtr first = allow_condexpr ? expression() : or_expr();
        if (!is_op(",")) return first;
        auto tuple = make(Expr::Kind::Tuple, line);
        tuple->children.push_back(std::move(first));
        while (is_op(",")) {
            advance();
            if (cur().kind == TK::StmtEnd || cur().kind == TK::ExprEnd || is_name("if")) break;
            tuple->children.push_back(allow_condexpr ? expression() : or_expr());
        }
        return tuple;
    }

    ExprPtr expression() {
        ExprPtr value = or_expr();
        while (is_name("if")) {
            const int line = cur().line;
            advance();
            auto cond = make(Expr::Kind::Conditional, line);
            cond->children.push_back(or_expr());
            cond->children.push_back(std::move(value));
            if (is_name("else")) {
                advance();
                cond->children.push_back(expression());
            } else {
                cond->children.push_back(nullptr);
            }
            value = std::move(cond);
        }
        return value;
    }

    ExprPtr binary(ExprPtr left, std::string op, ExprPtr right, int line) {
        auto e = make(Expr::Kind::Binary, line, std::move(op));
        e->children.push_back(std::move(left));
        e->children.push_back(std::move(right));
        return e;
    }

    ExprPtr or_expr() {
        ExprPtr left = and_expr();
        while (is_name("or")) {
            const int line = cur().line;
            advance();
            left = binary(std::move(left), "or", and_expr(), line);
        }
        return left;
    }

    ExprPtr and_expr() {
        ExprPtr left = not_expr();
        while (is_name("and")) {
            const int line = cur().line;
            advance();
            left = binary(std::move(left), "and", not_expr(), line);
        }
        return left;
    }

    ExprPtr not_expr() {
        if (is_name("not")) {
            auto e = make(Expr::Kind::Unary, cur().line, "not");
            advance();
            e->children.push_back(not_expr());
            return e;
        }
        return compare();
    }

    ExprPtr compare() {
        ExprPtr left = math1();
        // a < b < c means a < b and b < c; chains are rare in templates, so the middle operand
        // is simply evaluated twice.
        ExprPtr result;
        for (;;) {
            std::string op;
            const int line = cur().line;
            if (cur().kind == TK::Operator &&
                (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == ">" ||
                 cur().value == "<=" || cur().value == ">=")) {
                op = cur().value;
                advance();
            } else if (is_name("in")) {
                op = "in";
                advance();
            } else if (is_name("not") && peek().kind == TK::Name && peek().value == "in") {
                op = "not in";
                advance();
                advance();
            } else {
                break;
            }
            const std::size_t right_start = i_;
            ExprPtr right = math1();
            ExprPtr link = binary(std::move(left), op, std::move(right), line);
            result = result ? binary(std::move(result), "and", std::move(link), line) : std::move(link);
            // Re-parse the right operand as the next link's left operand.
            const std::size_t after = i_;
            i_ = right_start;
            left = math1();
            i_ = after;
        }
        return result ? std::move(result) : std::move(left);
    }

    ExprPtr math1() {
        ExprPtr left = concat();
        while (is_op("+") || is_op("-")) {
            const std::string op = cur().value;
            const int line = cur().line;
            advance();
            left = binary(std::move(left), op, concat(), line);
        }
        return left;
    }

    ExprPtr concat() {
        ExprPtr left = math2();
        while (is_op("~")) {
            const int line = cur().line;
            advance();
            left = binary(std::move(left), "~", math2(), line);
        }
        return left;
    }

    ExprPtr math2() {
        ExprPtr left = power();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = cur().value;
            const int line = cur().line;
            advance();
            left = binary(std::move(left), op, power(), line);
        }
        return left;
    }

    ExprPtr power() {
        ExprPtr left = unary(true);
        while (is_op("**")) {
            const int line = cur().line;
            advance();
            left = binary(std::move(left), "**", unary(true), line);
        }
        return left;
    }

    ExprPtr unary(bool with_filter) {
        ExprPtr node;
        if (is_op("-") || is_op("+")) {
            node = make(Expr::Kind::Unary, cur().line, cur().value);
            advance();
            node->children.push_back(unary(false));
        } else {
            node = primary();
        }
        node = postfix(std::move(node));
        if (with_filter) node = filters_and_tests(std::move(node));
        return node;
    }

    ExprPtr primary() {
        const Token& t = cur();
        const int line = t.line;
        switch (t.kind) {
            case TK::Name: {
                auto literal = [&](Value v) {
                    auto e = make(Expr::Kind::Literal, line);
                    e->value = std::move(v);
                    advance();
                    return e;
                };
                if (t.value == "true" || t.value == "True") return literal(Value::from(true));
                if (t.value == "false" || t.value == "False") return literal(Value::from(false));
                if (t.value == "none" || t.value == "None") return literal(Value::none());
                auto e = make(Expr::Kind::Name, line, t.value);
                advance();
                return e;
            }
            case TK::String: {
                // Adjacent string literals concatenate, as in Python.
                std::string text;
                while (cur().kind == TK::String) {
                    text += cur().value;
                    advance();
                }
                auto e = make(Expr::Kind::Literal, line);
                e->value = Value::from(std::move(text));
                return e;
            }
            case TK::Integer: {
                auto e = make(Expr::Kind::Literal, line);
                e->value = Value::from(t.integer);
                advance();
                return e;
            }
            case TK::Float: {
                auto e = make(Expr::Kind::Literal, line);
                e->value = Value::from(t.real);
                advance();
                return e;
            }
            case TK::Operator:
                if (t.value == "(") return parenthesized();
                if (t.value == "[") return list();
                if (t.value == "{") return dict();
                break;
            default: break;
        }
        expected("an expression");
    }

    ExprPtr parenthesized() {
        const int line = cur().line;
        advance();
        if (is_op(")")) {
            advance();
            return make(Expr::Kind::Tuple, line);
        }
        ExprPtr first = expression();
        if (is_op(")")) {
            advance();
            return first;
        }
        auto tuple = make(Expr::Kind::Tuple, line);
        tuple->children.push_back(std::move(first));
        while (is_op(",")) {
            advance();
            if (is_op(")")) break;
            tuple->children.push_back(expression());
        }
        expect_op(")");
        return tuple;
    }

    ExprPtr list() {
        auto e = make(Expr::Kind::List, cur().line);
        advance();
        while (!is_op("]")) {
            e->children.push_back(expression());
            if (!is_op(",")) break;
            advance();
        }
        expect_op("]");
        return e;
    }

    ExprPtr dict() {
        auto e = make(Expr::Kind::Dict, cur().line);
        advance();
        while (!is_op("}")) {
            e->children.push_back(expression());
            expect_op(":");
            e->children.push_back(expression());
            if (!is_op(",")) break;
            advance();
        }
        expect_op("}");
        return e;
    }

    ExprPtr postfix(ExprPtr node) {
        for (;;) {
            const int line = cur().line;
            if (is_op(".")) {
                advance();
                if (cur().kind == TK::Integer) {
                    // foo.0 is foo[0] in Jinja.
                    auto sub = make(Expr::Kind::Subscript, line);
                    sub->children.push_back(std::move(node));
                    auto index = make(Expr::Kind::Literal, line);
                    index->value = Value::from(cur().integer);
                    advance();
                    sub->children.push_back(std::move(index));
                    node = std::move(sub);
                    continue;
                }
                auto attr = make(Expr::Kind::Attribute, line, identifier());
                attr->children.push_back(std::move(node));
                node = std::move(attr);
            } else if (is_op("[")) {
                advance();
                node = subscript(std::move(node), line);
            } else if (is_op("(")) {
                node = call(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr subscript(ExprPtr node, int line) {
        ExprPtr parts[3];
        int part = 0;
        bool is_slice = false;
        for (;;) {
            if (is_op("]")) break;
            if (is_op(":")) {
                is_slice = true;
                if (++part > 2) fail("a slice has at most three parts");
                advance();
                continue;
            }
            parts[part] = expression();
            if (!is_op(":") && !is_op("]")) expected("':' or ']'");
        }
        advance();
        if (!is_slice) {
            if (!parts[0]) fail("empty subscript");
            auto sub = make(Expr::Kind::Subscript, line);
            sub->children.push_back(std::move(node));
            sub->children.push_back(std::move(parts[0]));
            return sub;
        }
        auto slice = make(Expr::Kind::Slice, line);
        slice->children.push_back(std::move(node));
        for (auto& p : parts) slice->children.push_back(std::move(p));
        return slice;
    }

    // Arguments of a call, filter or test, after '('.
    void arguments(Expr& target) {
        expect_op("(");
        while (!is_op(")")) {
            if (cur().kind == TK::Name && peek().kind == TK::Operator && peek().value == "=") {
                std::string name = identifier();
                advance();
                target.named.emplace_back(std::move(name), expression());
            } else {
                if (!target.named.empty()) fail("positional argument after keyword argument");
                target.children.push_back(expression());
            }
            if (!is_op(",")) break;
            advance();
        }
        expect_op(")");
    }

    ExprPtr call(ExprPtr callee) {
        auto e = make(Expr::Kind::Call, cur().line);
        e->children.push_back(std::move(callee));
        arguments(*e);
        return e;
    }

    ExprPtr one_filter(ExprPtr node) {
        const int line = cur().line;
        std::string name = identifier();
        while (is_op(".")) {  // dotted filter names exist in Jinja; keep them whole
            advance();
            name += "." + identifier();
        }
        auto f = make(Expr::Kind::Filter, line, std::move(name));
        f->children.push_back(std::move(node));
        if (is_op("(")) arguments(*f);
        return f;
    }

    // "| f | g(x)"; a filter block's chain starts without the bar. A null `node` is the
    // block's body, supplied when it renders.
    ExprPtr filter_chain(ExprPtr node, bool leading_bar = true) {
        if (!leading_bar) node = one_filter(std::move(node));
        while (is_op("|")) {
            advance();
            node = one_filter(std::move(node));
        }
        return node;
    }

    ExprPtr filters_and_tests(ExprPtr node) {
        for (;;) {
            if (is_op("|")) {
                node = filter_chain(std::move(node));
            } else if (is_name("is")) {
                const int line = cur().line;
                advance();
                bool negated = false;
                if (is_name("not")) {
                    negated = true;
                    advance();
                }
                std::string name = identifier();
                auto t = make(Expr::Kind::Test, line, std::move(name));
                t->negated = negated;
                t->children.push_back(std::move(node));
                if (is_op("(")) {
                    arguments(*t);
                } else if ((cur().kind == TK::Name || cur().kind == TK::String || cur().kind == TK::Integer ||
                            cur().kind == TK::Float || is_op("[") || is_op("{")) &&
                           !is_name("else") && !is_name("or") && !is_name("and") && !is_name("is") &&
                           !is_name("if") && !is_name("in") && !is_name("not")) {
                    // "x is divisibleby 3": a single argument without parentheses.
                    t->children.push_back(postfix(primary()));
                }
                node = std::move(t);
            } else if (is_op("(")) {
                node = call(std::move(node));
            } else {
                return node;
            }
        }
    }

    std::vector<Token> t_;
    std::size_t i_ = 0;
};

}  // namespace

StmtList parse_template(std::string_view source) { return Parser(tokenize(source)).document(); }

}  // namespace tokenscope::jinja
