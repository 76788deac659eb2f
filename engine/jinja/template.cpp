#include "jinja/template.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/parser.h"
#include "jinja/string_ops.h"

namespace tokenscope::jinja {

namespace {

// Variables of one scope. Jinja gives a new scope to for-loop bodies and macro calls (which is
// why templates need namespace() to carry a value out of a loop); if-blocks share their parent's.
struct Scope {
    std::unordered_map<std::string, Value> vars;
    Scope* parent = nullptr;

    const Value* find(const std::string& name) const {
        for (const Scope* s = this; s; s = s->parent) {
            auto it = s->vars.find(name);
            if (it != s->vars.end()) return &it->second;
        }
        return nullptr;
    }
};

enum class Flow { Normal, Break, Continue };

// An error already carrying its line: passed through unchanged by the outer statements.
bool has_line(const std::string& message) { return message.rfind("chat template line ", 0) == 0; }

std::string english_strftime(const std::string& format, const std::tm& t) {
    static const char* const kDays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
    static const char* const kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                          "July",    "August",   "September", "October", "November", "December"};
    // Python's strftime follows the C locale of the process; a model's template expects English
    // dates, so the names are fixed here rather than taken from the user's locale.
    std::string out;
    auto two = [&](int v) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%02d", v);
        out += buf;
    };
    for (std::size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%' || i + 1 == format.size()) {
            out += format[i];
            continue;
        }
        const char c = format[++i];
        switch (c) {
            case 'a': out += std::string(kDays[t.tm_wday]).substr(0, 3); break;
            case 'A': out += kDays[t.tm_wday]; break;
            case 'b': out += std::string(kMonths[t.tm_mon]).substr(0, 3); break;
            case 'B': out += kMonths[t.tm_mon]; break;
            case 'd': two(t.tm_mday); break;
            case 'e': {
                char buf[16];
                std::snprintf(buf, sizeof buf, "%2d", t.tm_mday);
                out += buf;
                break;
            }
            case 'm': two(t.tm_mon + 1); break;
            case 'y': two(t.tm_year % 100); break;
            case 'Y': out += std::to_string(t.tm_year + 1900); break;
            case 'H': two(t.tm_hour); break;
            case 'I': two(t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12); break;
            case 'M': two(t.tm_min); break;
            case 'S': two(t.tm_sec); break;
            case 'p': out += t.tm_hour < 12 ? "AM" : "PM"; break;
            case 'j': {
                char buf[16];
                std::snprintf(buf, sizeof buf, "%03d", t.tm_yday + 1);
                out += buf;
                break;
            }
            case '%': out += '%'; break;
            default:
                out += '%';
                out += c;
        }
    }
    return out;
}

class Renderer {
  public:
    Renderer(const Object& context, const RenderOptions& options) : options_(options) {
        for (const auto& [k, v] : context.items) globals_.vars[k] = v;
        install_globals();
        top_.parent = &globals_;
    }

    std::string run(const StmtList& body) {
        std::string out;
        const Flow flow = exec(body, top_, out);
        (void)flow;  // a stray break/continue outside a loop was rejected when it ran
        return out;
    }

  private:
    void install_globals() {
        auto define = [&](const std::string& name, std::function<Value(const CallArgs&)> fn) {
            if (!globals_.vars.count(name)) globals_.vars[name] = Value::function(name, std::move(fn));
        };
        define("raise_exception", [](const CallArgs& args) -> Value {
            const Value* msg = argument(args, 0, "message");
            throw TemplateRaised("raise_exception: " + (msg ? msg->str() : std::string("(no message)")));
        });
        const std::time_t now = std::chrono::system_clock::to_time_t(options_.now);
        std::tm local{};
#ifdef _WIN32
        localtime_s(&local, &now);
#else
        localtime_r(&now, &local);
#endif
        define("strftime_now", [local](const CallArgs& args) {
            const Value* fmt = argument(args, 0, "format");
            if (!fmt || !fmt->is_string()) throw TemplateError("strftime_now needs a format string");
            return Value::from(english_strftime(fmt->text, local));
        });
        define("range", [](const CallArgs& args) {
            std::int64_t start = 0, stop = 0, step = 1;
            auto get = [&](std::size_t i) {
                if (!args.positional[i].is_integral()) throw TemplateError("range() needs integers");
                return args.positional[i].integer;
            };
            if (args.positional.size() == 1) {
                stop = get(0);
            } else if (args.positional.size() >= 2) {
                start = get(0);
                stop = get(1);
                if (args.positional.size() >= 3) step = get(2);
            } else {
                throw TemplateError("range() needs 1 to 3 arguments");
            }
            if (step == 0) throw TemplateError("range() step must not be zero");
            Array out;
            for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
                if (out.size() >= 1'000'000) throw TemplateError("range() longer than 1,000,000 items");
                out.push_back(Value::from(i));
                if (__builtin_add_overflow(i, step, &i)) break;
            }
            return Value::from(std::move(out));
        });
        define("namespace", [](const CallArgs& args) {
            Object ns;
            ns.is_namespace = true;
            for (const auto& p : args.positional) {
                if (!p.is_object() || p.object->is_namespace)
                    throw TemplateError("namespace() takes a dict, not '" + p.type_name() + "'");
                for (const auto& [k, v] : p.object->items) ns.set(k, v);
            }
            for (const auto& [k, v] : args.named) ns.set(k, v);
            return Value::from(std::move(ns));
        });
        define("dict", [](const CallArgs& args) {
            Object d;
            for (const auto& p : args.positional)
                if (p.is_object())
                    for (const auto& [k, v] : p.object->items) d.set(k, v);
            for (const auto& [k, v] : args.named) d.set(k, v);
            return Value::from(std::move(d));
        });
    }

    void step(int line) {
        if (++steps_ > options_.max_steps)
            throw TemplateError("chat template line " + std::to_string(line) + ": rendering took more than " +
                                std::to_string(options_.max_steps) + " steps (an endless loop?)");
    }

    void write(std::string& out, std::string_view text, int line) {
        out.append(text);
        if (out.size() > options_.max_output_bytes)
            throw TemplateError("chat template line " + std::to_string(line) + ": output larger than " +
                                std::to_string(options_.max_output_bytes >> 20) + " MiB");
    }

    Flow exec(const StmtList& body, Scope& scope, std::string& out) {
        for (const auto& s : body) {
            try {
                const Flow f = exec_one(*s, scope, out);
                if (f != Flow::Normal) return f;
            } catch (const TemplateRaised& e) {
                if (has_line(e.what())) throw;
                throw TemplateRaised("chat template line " + std::to_string(s->line) + ": " + e.what());
            } catch (const TemplateError& e) {
                if (has_line(e.what())) throw;
                throw TemplateError("chat template line " + std::to_string(s->line) + ": " + e.what());
            }
        }
        return Flow::Normal;
    }

    Flow exec_one(const Stmt& s, Scope& scope, std::string& out) {
        step(s.line);
        switch (s.kind) {
            case Stmt::Kind::Text: write(out, s.text, s.line); return Flow::Normal;
            case Stmt::Kind::Output: {
                const Value v = eval(*s.expr, scope);
                write(out, v.str(), s.line);
                return Flow::Normal;
            }
            case Stmt::Kind::If:
                for (std::size_t i = 0; i < s.conditions.size(); ++i)
                    if (eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope, out);
                return exec(s.else_body, scope, out);
            case Stmt::Kind::For: return exec_for(s, scope, out);
            case Stmt::Kind::Set: {
                Value v = eval(*s.expr, scope);
                if (!s.text.empty()) {
                    const Value* ns = scope.find(s.targets[0]);
                    if (!ns || !ns->is_object() || !ns->object->is_namespace)
                        throw TemplateError("cannot assign attribute '" + s.text + "' on '" + s.targets[0] +
                                            "': it is not a namespace()");
                    ns->object->set(s.text, std::move(v));
                } else {
                    assign(s.targets, std::move(v), scope);
                }
                return Flow::Normal;
            }
            case Stmt::Kind::SetBlock: {
                std::string captured;
                exec(s.body, scope, captured);
                Value v = Value::from(std::move(captured));
                if (s.filter) v = eval_filter_chain(*s.filter, v, scope);
                scope.vars[s.targets[0]] = std::move(v);
                return Flow::Normal;
            }
            case Stmt::Kind::Macro: scope.vars[s.text] = make_macro(s); return Flow::Normal;
            case Stmt::Kind::CallBlock: {
                const Expr& call = *s.expr;
                Value callee = eval(*call.children[0], scope);
                CallArgs args = eval_args(call, scope);
                Scope* defining = &scope;
                const Stmt* block = &s;
                args.named.emplace_back("caller", Value::function("caller", [this, defining, block](const CallArgs&) {
                    Scope inner;
                    inner.parent = defining;
                    std::string text;
                    exec(block->body, inner, text);
                    return Value::from(std::move(text));
                }));
                write(out, call_value(callee, args, call.line).str(), s.line);
                return Flow::Normal;
            }
            case Stmt::Kind::FilterBlock: {
                std::string captured;
                exec(s.body, scope, captured);
                write(out, eval_filter_chain(*s.expr, Value::from(std::move(captured)), scope).str(), s.line);
                return Flow::Normal;
            }
            case Stmt::Kind::Break:
                if (loop_depth_ == 0) throw TemplateError("'break' outside a loop");
                return Flow::Break;
            case Stmt::Kind::Continue:
                if (loop_depth_ == 0) throw TemplateError("'continue' outside a loop");
                return Flow::Continue;
            case Stmt::Kind::Do: eval(*s.expr, scope); return Flow::Normal;
            case Stmt::Kind::Scope: return exec(s.body, scope, out);
        }
        return Flow::Normal;
    }

    void assign(const std::vector<std::string>& targets, Value v, Scope& scope) {
        if (targets.size() == 1) {
            scope.vars[targets[0]] = std::move(v);
            return;
        }
        const auto items = iterate(v);
        if (items.size() != targets.size())
            throw TemplateError("cannot unpack " + std::to_string(items.size()) + " values into " +
                                std::to_string(targets.size()) + " names");
        for (std::size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
    }

    Flow exec_for(const Stmt& s, Scope& scope, std::string& out) {
        std::vector<Value> items = iterate(eval(*s.expr, scope));
        if (s.filter) {
            std::vector<Value> kept;
            for (auto& item : items) {
                Scope probe;
                probe.parent = &scope;
                assign(s.targets, item, probe);
                if (eval(*s.filter, probe).truthy()) kept.push_back(std::move(item));
            }
            items = std::move(kept);
        }
        if (items.empty()) return exec(s.else_body, scope, out);
        const auto n = static_cast<std::int64_t>(items.size());
        ++loop_depth_;
        struct DepthGuard {
            int& d;
            ~DepthGuard() { --d; }
        } guard{loop_depth_};
        for (std::int64_t i = 0; i < n; ++i) {
            step(s.line);
            Scope body;
            body.parent = &scope;
            assign(s.targets, items[static_cast<std::size_t>(i)], body);
            Object loop;
            loop.set("index", Value::from(i + 1));
            loop.set("index0", Value::from(i));
            loop.set("revindex", Value::from(n - i));
            loop.set("revindex0", Value::from(n - i - 1));
            loop.set("first", Value::from(i == 0));
            loop.set("last", Value::from(i == n - 1));
            loop.set("length", Value::from(n));
            loop.set("depth", Value::from(std::int64_t{1}));
            loop.set("depth0", Value::from(std::int64_t{0}));
            loop.set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("there is no previous item"));
            loop.set("nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value::undefined("there is no next item"));
            loop.set("cycle", Value::function("loop.cycle", [i](const CallArgs& args) {
                if (args.positional.empty()) throw TemplateError("loop.cycle() needs at least one value");
                return args.positional[static_cast<std::size_t>(i) % args.positional.size()];
            }));
            body.vars["loop"] = Value::from(std::move(loop));
            const Flow f = exec(s.body, body, out);
            if (f == Flow::Break) break;
        }
        return Flow::Normal;
    }

    Value make_macro(const Stmt& s) {
        const Stmt* macro = &s;
        return Value::function(s.text, [this, macro](const CallArgs& args) {
            if (++call_depth_ > 64) {
                --call_depth_;
                throw TemplateError("macro '" + macro->text + "' nested more than 64 calls deep");
            }
            struct DepthGuard {
                int& d;
                ~DepthGuard() { --d; }
            } guard{call_depth_};
            // A macro sees the template's top-level variables, not its caller's locals.
            Scope local;
            local.parent = &top_;
            std::size_t next = 0;
            for (const auto& p : macro->params) {
                if (next < args.positional.size()) {
                    local.vars[p.name] = args.positional[next++];
                } else if (const Value* v = args.named_arg(p.name)) {
                    local.vars[p.name] = *v;
                } else if (p.default_value) {
                    local.vars[p.name] = eval(*p.default_value, local);
                } else {
                    local.vars[p.name] = Value::undefined("'" + p.name + "' is undefined");
                }
            }
            Array varargs(args.positional.begin() + static_cast<std::ptrdiff_t>(std::min(next, args.positional.size())),
                          args.positional.end());
            local.vars["varargs"] = Value::from(std::move(varargs), /*tuple=*/true);
            Object kwargs;
            for (const auto& named : args.named) {
                const std::string& k = named.first;
                const bool is_param = std::any_of(macro->params.begin(), macro->params.end(),
                                                  [&k](const MacroParam& p) { return p.name == k; });
                if (k == "caller") local.vars["caller"] = named.second;
                else if (!is_param) kwargs.set(k, named.second);
            }
            local.vars["kwargs"] = Value::from(std::move(kwargs));
            std::string text;
            const int saved_loops = loop_depth_;
            loop_depth_ = 0;
            exec(macro->body, local, text);
            loop_depth_ = saved_loops;
            return Value::from(std::move(text));
        });
    }

    CallArgs eval_args(const Expr& e, Scope& scope, std::size_t first = 1) {
        CallArgs args;
        for (std::size_t i = first; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i], scope));
        for (const auto& [k, v] : e.named) args.named.emplace_back(k, eval(*v, scope));
        return args;
    }

    Value call_value(const Value& callee, const CallArgs& args, int line) {
        step(line);
        if (callee.is_undefined())
            throw TemplateError(callee.text.empty() ? "called an undefined value" : callee.text);
        if (callee.kind != Value::Kind::Callable) throw TemplateError("'" + callee.type_name() + "' object is not callable");
        return callee.callable->call(args);
    }

    Value eval_filter_chain(const Expr& e, const Value& input, Scope& scope) {
        if (e.kind != Expr::Kind::Filter) return eval(e, scope);
        const Value inner = e.children[0] ? eval_filter_chain(*e.children[0], input, scope) : input;
        return apply_filter(e.name, inner, eval_args(e, scope));
    }

    Value eval(const Expr& e, Scope& scope) {
        switch (e.kind) {
            case Expr::Kind::Literal: return e.value;
            case Expr::Kind::Name: {
                if (const Value* v = scope.find(e.name)) return *v;
                return Value::undefined("'" + e.name + "' is undefined");
            }
            case Expr::Kind::Attribute: return get_attribute(eval(*e.children[0], scope), e.name);
            case Expr::Kind::Subscript: return get_item(eval(*e.children[0], scope), eval(*e.children[1], scope));
            case Expr::Kind::Slice: {
                auto part = [&](std::size_t i) { return e.children[i] ? eval(*e.children[i], scope) : Value::none(); };
                return get_slice(eval(*e.children[0], scope), part(1), part(2), part(3));
            }
            case Expr::Kind::Call: return call_value(eval(*e.children[0], scope), eval_args(e, scope), e.line);
            case Expr::Kind::Filter: return eval_filter_chain(e, Value(), scope);
            case Expr::Kind::Test: {
                const bool r = apply_test(e.name, eval(*e.children[0], scope), eval_args(e, scope));
                return Value::from(e.negated ? !r : r);
            }
            case Expr::Kind::Unary: {
                const Value v = eval(*e.children[0], scope);
                if (e.name == "not") return Value::from(!v.truthy());
                if (v.is_undefined()) throw TemplateError(v.text.empty() ? "value is undefined" : v.text);
                if (!v.is_number()) throw TemplateError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
                if (e.name == "+") return v.kind == Value::Kind::Float ? v : Value::from(as_int(v));
                if (v.kind == Value::Kind::Float) return Value::from(-v.real);
                if (v.kind == Value::Kind::Int && v.integer == INT64_MIN) throw TemplateError("integer overflow in unary -");
                return Value::from(-(v.kind == Value::Kind::Bool ? std::int64_t{v.boolean} : v.integer));
            }
            case Expr::Kind::Binary: return binary(e, scope);
            case Expr::Kind::Conditional:
                if (eval(*e.children[0], scope).truthy()) return eval(*e.children[1], scope);
                return e.children[2] ? eval(*e.children[2], scope) : Value::undefined("the 'if' had no 'else'");
            case Expr::Kind::List:
            case Expr::Kind::Tuple: {
                Array items;
                for (const auto& c : e.children) items.push_back(eval(*c, scope));
                return Value::from(std::move(items), e.kind == Expr::Kind::Tuple);
            }
            case Expr::Kind::Dict: {
                Object obj;
                for (std::size_t i = 0; i + 1 < e.children.size(); i += 2) {
                    const Value key = eval(*e.children[i], scope);
                    obj.set(key.str(), eval(*e.children[i + 1], scope));
                }
                return Value::from(std::move(obj));
            }
        }
        return Value();
    }

    static std::int64_t as_int(const Value& v) { return v.kind == Value::Kind::Bool ? v.boolean : v.integer; }

    Value binary(const Expr& e, Scope& scope) {
        const std::string& op = e.name;
        if (op == "and") {
            Value l = eval(*e.children[0], scope);
            return l.truthy() ? eval(*e.children[1], scope) : l;
        }
        if (op == "or") {
            Value l = eval(*e.children[0], scope);
            return l.truthy() ? l : eval(*e.children[1], scope);
        }
        const Value l = eval(*e.children[0], scope);
        const Value r = eval(*e.children[1], scope);
        if (op == "~") return Value::from(l.str() + r.str());
        if (op == "==") return Value::from(equal(l, r));
        if (op == "!=") return Value::from(!equal(l, r));
        if (op == "in") return Value::from(contains(r, l));
        if (op == "not in") return Value::from(!contains(r, l));
        for (const Value* v : {&l, &r})
            if (v->is_undefined()) throw TemplateError(v->text.empty() ? "value is undefined" : v->text);
        if (op == "<") return Value::from(less(l, r));
        if (op == ">") return Value::from(less(r, l));
        if (op == "<=") return Value::from(!less(r, l));
        if (op == ">=") return Value::from(!less(l, r));
        return arithmetic(op, l, r);
    }

    static Value arithmetic(const std::string& op, const Value& l, const Value& r) {
        auto type_error = [&]() -> Value {
            throw TemplateError("unsupported operand type(s) for " + op + ": '" + l.type_name() + "' and '" +
                                r.type_name() + "'");
        };
        if (op == "+") {
            if (l.is_string() && r.is_string()) return Value::from(l.text + r.text);
            if (l.is_array() && r.is_array()) {
                Array out = *l.array;
                out.insert(out.end(), r.array->begin(), r.array->end());
                return Value::from(std::move(out));
            }
        }
        if (op == "*") {
            // "=" * 10 and [x] * n, as in Python.
            const Value* seq = l.is_string() || l.is_array() ? &l : r.is_string() || r.is_array() ? &r : nullptr;
            const Value* count = seq == &l ? &r : &l;
            if (seq && count->is_integral()) {
                const std::int64_t n = std::max<std::int64_t>(0, as_int(*count));
                const auto unit = static_cast<std::int64_t>(seq->is_string() ? seq->text.size() : seq->array->size());
                if (unit > 0 && n > (std::int64_t{64} << 20) / unit)
                    throw TemplateError("repetition larger than 64 MiB");
                if (seq->is_string()) {
                    std::string out;
                    for (std::int64_t i = 0; i < n; ++i) out += seq->text;
                    return Value::from(std::move(out));
                }
                Array out;
                for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->array->begin(), seq->array->end());
                return Value::from(std::move(out));
            }
        }
        if (!l.is_number() || !r.is_number()) return type_error();
        const bool ints = l.is_integral() && r.is_integral();
        if (op == "/") {
            if (r.as_double() == 0) throw TemplateError("division by zero");
            return Value::from(l.as_double() / r.as_double());
        }
        if (ints) {
            // Python's ints do not overflow; ours are 64-bit, so overflow is an error, not UB.
            const std::int64_t a = as_int(l), b = as_int(r);
            std::int64_t result = 0;
            auto checked = [&](bool overflowed) {
                if (overflowed) throw TemplateError("integer overflow in " + op);
                return Value::from(result);
            };
            if (op == "+") return checked(__builtin_add_overflow(a, b, &result));
            if (op == "-") return checked(__builtin_sub_overflow(a, b, &result));
            if (op == "*") return checked(__builtin_mul_overflow(a, b, &result));
            if (op == "//" || op == "%") {
                if (b == 0) throw TemplateError("integer division or modulo by zero");
                if (a == INT64_MIN && b == -1) throw TemplateError("integer overflow in " + op);
                std::int64_t q = a / b, m = a % b;
                if (m != 0 && ((m < 0) != (b < 0))) {  // Python floors
                    --q;
                    m += b;
                }
                return Value::from(op == "//" ? q : m);
            }
            if (op == "**") {
                if (b >= 0) {
                    result = 1;
                    for (std::int64_t i = 0; i < b; ++i) {
                        if (__builtin_mul_overflow(result, a, &result)) throw TemplateError("integer overflow in **");
                        if (result == 0 || result == 1) break;  // 0**n, 1**n
                        if (result == -1 && a == -1) {  // (-1)**n
                            result = (b % 2 == 0) ? 1 : -1;
                            break;
                        }
                    }
                    return Value::from(result);
                }
                return Value::from(std::pow(static_cast<double>(a), static_cast<double>(b)));
            }
        }
        const double a = l.as_double(), b = r.as_double();
        if (op == "+") return Value::from(a + b);
        if (op == "-") return Value::from(a - b);
        if (op == "*") return Value::from(a * b);
        if (op == "//" || op == "%") {
            if (b == 0) throw TemplateError("float division by zero");
            const double q = std::floor(a / b);
            return Value::from(op == "//" ? q : a - q * b);
        }
        if (op == "**") return Value::from(std::pow(a, b));
        return type_error();
    }

    const RenderOptions& options_;
    Scope globals_;
    Scope top_;
    std::int64_t steps_ = 0;
    int loop_depth_ = 0;
    int call_depth_ = 0;
};

}  // namespace

Template::Template(std::string_view source)
    : body_(std::make_shared<const StmtList>(parse_template(source))) {}

std::string Template::render(const Object& context, const RenderOptions& options) const {
    Renderer renderer(context, options);
    return renderer.run(*body_);
}

}  // namespace tokenscope::jinja
