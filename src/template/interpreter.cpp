#include "template/interpreter.h"

#include <ctime>
#include <utility>

#include "template/builtins.h"

namespace lift::tmpl {

namespace {

// Deepest nesting of statement and expression evaluation, macro calls included: bounds the
// C++ stack a render can use.
constexpr int kMaxEvalDepth = 1500;

struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  const Frame* parent = nullptr;

  const Value* find(std::string_view name) const {
    for (const Frame* f = this; f; f = f->parent) {
      for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it) {
        if (it->first == name) return &it->second;
      }
    }
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

enum class Flow { normal, break_, continue_ };

class Interp {
 public:
  Interp(const Object& context, const RenderOptions& opts) : opts_(opts) {
    add_globals();
    for (const auto& [k, v] : context.items) root_.set(k, v);
    root_.parent = &globals_;
  }

  std::string run(const Body& body) {
    std::string out;
    exec(body, root_, out);
    return out;
  }

 private:
  struct Depth {
    Depth(Interp& in, int line) : in_(in) {
      if (++in_.depth_ > kMaxEvalDepth) {
        in_.fail(line, "template evaluation nests deeper than " + std::to_string(kMaxEvalDepth));
      }
    }
    ~Depth() { --in_.depth_; }
    Interp& in_;
  };

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw TemplateError("template line " + std::to_string(line) + ": " + what);
  }

  void step(int line) {
    if (++steps_ > opts_.max_steps) {
      fail(line, "template exceeded " + std::to_string(opts_.max_steps) + " steps");
    }
  }

  void emit(std::string& out, std::string_view s, int line) {
    emitted_ += s.size();
    if (emitted_ > opts_.max_output_bytes) {
      fail(line, "template output exceeds " + std::to_string(opts_.max_output_bytes) + " bytes");
    }
    out.append(s);
  }

  // ---- globals ----------------------------------------------------------------------------
  void add_globals() {
    globals_.set("raise_exception", Value::function("raise_exception", [](const CallArgs& a) {
                   const Value* m = a.get(0, "message");
                   throw TemplateRaise(m ? to_str(*m) : std::string("raise_exception() called"));
                   return Value();
                 }));
    globals_.set("namespace", Value::function("namespace", [](const CallArgs& a) {
                   Object o;
                   for (const Value& p : a.positional) {
                     if (!p.is_object()) throw TemplateError("namespace() takes a dict");
                     for (const auto& [k, v] : p.obj().items) o.set(k, v);
                   }
                   for (const auto& [k, v] : a.named) o.set(k, v);
                   return Value::object(std::move(o), true);
                 }));
    globals_.set("dict", Value::function("dict", [](const CallArgs& a) {
                   Object o;
                   for (const Value& p : a.positional) {
                     if (!p.is_object()) throw TemplateError("dict() takes a dict");
                     for (const auto& [k, v] : p.obj().items) o.set(k, v);
                   }
                   for (const auto& [k, v] : a.named) o.set(k, v);
                   return Value::object(std::move(o));
                 }));
    globals_.set("range", Value::function("range", [this](const CallArgs& a) {
                   int64_t start = 0, stop = 0, stp = 1;
                   auto int_arg = [](const Value& v) {
                     if (!v.is_int() && !v.is_bool()) {
                       throw TemplateError("range() takes integers, not '" + type_name(v) + "'");
                     }
                     return v.as_int();
                   };
                   if (a.positional.size() == 1) {
                     stop = int_arg(a.positional[0]);
                   } else if (a.positional.size() == 2 || a.positional.size() == 3) {
                     start = int_arg(a.positional[0]);
                     stop = int_arg(a.positional[1]);
                     if (a.positional.size() == 3) stp = int_arg(a.positional[2]);
                   } else {
                     throw TemplateError("range() takes 1 to 3 arguments");
                   }
                   if (stp == 0) throw TemplateError("range() arg 3 must not be zero");
                   Array out;
                   for (int64_t i = start; stp > 0 ? i < stop : i > stop; i += stp) {
                     step(0);
                     out.emplace_back(i);
                   }
                   return Value::array(std::move(out));
                 }));
    globals_.set("strftime_now", Value::function("strftime_now", [this](const CallArgs& a) {
                   const Value* f = a.get(0, "format");
                   if (!f || !f->is_string())
                     throw TemplateError("strftime_now() takes a format string");
                   const std::time_t t = opts_.now_unix ? static_cast<std::time_t>(*opts_.now_unix)
                                                        : std::time(nullptr);
                   std::tm tm{};
                   localtime_r(&t, &tm);
                   char buf[512];
                   const size_t n = std::strftime(buf, sizeof buf, f->str().c_str(), &tm);
                   return Value(std::string(buf, n));
                 }));
  }

  // ---- statements -------------------------------------------------------------------------
  Flow exec(const Body& body, Frame& frame, std::string& out) {
    for (const StmtPtr& s : body) {
      const Flow f = exec_one(*s, frame, out);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

  Flow exec_one(const Stmt& s, Frame& frame, std::string& out) {
    Depth guard(*this, s.line);
    switch (s.kind) {
      case Stmt::Kind::text:
        emit(out, s.text, s.line);
        return Flow::normal;
      case Stmt::Kind::output:
        emit(out, to_str(eval(*s.expr, frame)), s.line);
        return Flow::normal;
      case Stmt::Kind::if_:
        for (size_t i = 0; i < s.conds.size(); ++i) {
          if (truthy(eval(*s.conds[i], frame))) return exec(s.bodies[i], frame, out);
        }
        return exec(s.else_body, frame, out);
      case Stmt::Kind::for_:
        return exec_for(s, frame, out);
      case Stmt::Kind::set:
        exec_set(s, frame);
        return Flow::normal;
      case Stmt::Kind::set_block: {
        std::string text;
        Frame inner{{}, &frame};
        exec(s.body, inner, text);
        Value v(std::move(text));
        if (s.expr) v = apply_filters(*s.expr, std::move(v), frame);
        frame.set(s.targets[0], std::move(v));
        return Flow::normal;
      }
      case Stmt::Kind::macro:
        frame.set(s.name, make_macro(s));
        return Flow::normal;
      case Stmt::Kind::call_block:
        emit(out, to_str(exec_call_block(s, frame)), s.line);
        return Flow::normal;
      case Stmt::Kind::filter_block: {
        std::string text;
        Frame inner{{}, &frame};
        exec(s.body, inner, text);
        emit(out, to_str(apply_filters(*s.expr, Value(std::move(text)), frame)), s.line);
        return Flow::normal;
      }
      case Stmt::Kind::break_:
        return Flow::break_;
      case Stmt::Kind::continue_:
        return Flow::continue_;
      case Stmt::Kind::scope:
        return exec(s.body, frame, out);
    }
    return Flow::normal;
  }

  void bind_targets(const Stmt& s, Frame& frame, const Value& item) {
    if (s.targets.size() == 1) {
      frame.set(s.targets[0], item);
      return;
    }
    const Array parts = iterate(item);
    if (parts.size() != s.targets.size()) {
      fail(s.line, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                       std::to_string(s.targets.size()) + " names");
    }
    for (size_t i = 0; i < parts.size(); ++i) frame.set(s.targets[i], parts[i]);
  }

  Flow exec_for(const Stmt& s, Frame& frame, std::string& out) {
    const Value seq = eval(*s.expr, frame);
    Array items = iterate(seq);
    if (s.cond) {
      Array kept;
      for (const Value& item : items) {
        step(s.line);
        Frame probe{{}, &frame};
        bind_targets(s, probe, item);
        if (truthy(eval(*s.cond, probe))) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto n = static_cast<int64_t>(items.size());
    // As in Jinja2, the else block runs unless some iteration's body ran to its end (an
    // iteration left by break or continue does not count).
    bool completed = false;
    for (int64_t i = 0; i < n; ++i) {
      step(s.line);
      Frame inner{{}, &frame};
      Object loop;
      loop.items.reserve(12);
      loop.items.emplace_back("index", Value(i + 1));
      loop.items.emplace_back("index0", Value(i));
      loop.items.emplace_back("revindex", Value(n - i));
      loop.items.emplace_back("revindex0", Value(n - i - 1));
      loop.items.emplace_back("first", Value(i == 0));
      loop.items.emplace_back("last", Value(i == n - 1));
      loop.items.emplace_back("length", Value(n));
      loop.items.emplace_back("depth", Value(1));
      loop.items.emplace_back("depth0", Value(0));
      loop.items.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)]
                                                : Value::undefined("there is no previous item"));
      loop.items.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)]
                                                    : Value::undefined("there is no next item"));
      loop.items.emplace_back("cycle", Value::function("cycle", [i](const CallArgs& a) {
                                if (a.positional.empty()) {
                                  throw TemplateError("no items for cycling given");
                                }
                                return a.positional[static_cast<size_t>(i) % a.positional.size()];
                              }));
      inner.set("loop", Value::object(std::move(loop)));
      bind_targets(s, inner, items[static_cast<size_t>(i)]);
      const Flow f = exec(s.body, inner, out);
      if (f == Flow::break_) break;
      completed = completed || f == Flow::normal;
    }
    if (!completed) {
      Frame inner{{}, &frame};
      exec(s.else_body, inner, out);
    }
    return Flow::normal;
  }

  void exec_set(const Stmt& s, Frame& frame) {
    Value v = eval(*s.expr, frame);
    if (!s.text.empty()) {
      const Value* ns = frame.find(s.targets[0]);
      if (!ns || !ns->is_namespace()) {
        fail(s.line, "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
      }
      ns->mutable_obj().set(s.text, std::move(v));
      return;
    }
    if (s.targets.size() == 1) {
      frame.set(s.targets[0], std::move(v));
    } else {
      bind_targets(s, frame, v);
    }
  }

  // ---- macros -----------------------------------------------------------------------------
  Value make_macro(const Stmt& s) {
    const Stmt* def = &s;
    return Value::function(s.name, [this, def](const CallArgs& a) { return call_macro(*def, a); });
  }

  Value call_macro(const Stmt& def, const CallArgs& a) {
    step(def.line);
    if (++call_depth_ > opts_.max_call_depth) {
      --call_depth_;
      fail(def.line, "macro calls nest deeper than " + std::to_string(opts_.max_call_depth));
    }
    struct Unwind {
      int& d;
      ~Unwind() { --d; }
    } unwind{call_depth_};
    if (a.positional.size() > def.params.size()) {
      fail(def.line, "macro '" + def.name + "' takes not more than " +
                         std::to_string(def.params.size()) + " argument(s)");
    }
    Frame frame{{}, &root_};
    for (size_t i = 0; i < def.params.size(); ++i) {
      const MacroParam& p = def.params[i];
      const Value* given = a.get(i, p.name);
      if (given) {
        frame.set(p.name, *given);
      } else if (p.default_value) {
        frame.set(p.name, eval(*p.default_value, frame));
      } else {
        frame.set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
      }
    }
    for (const auto& [k, v] : a.named) {
      bool known = k == "caller";
      for (const MacroParam& p : def.params) known = known || p.name == k;
      if (!known) fail(def.line, "macro '" + def.name + "' takes no keyword argument '" + k + "'");
      if (k == "caller") frame.set(k, v);
    }
    std::string out;
    exec(def.body, frame, out);
    return Value(std::move(out));
  }

  Value exec_call_block(const Stmt& s, Frame& frame) {
    const Expr& call = *s.expr;
    const Value callee = eval(*call.args[0], frame);
    if (!callee.is_function()) fail(s.line, "{% call %} needs a macro");
    CallArgs args = eval_args(call, frame, 1);
    const Stmt* def = &s;
    Frame* outer = &frame;
    args.named.emplace_back(
        "caller", Value::function("caller", [this, def, outer](const CallArgs& a) {
          Frame inner{{}, outer};
          for (size_t i = 0; i < def->params.size(); ++i) {
            const Value* given = a.get(i, def->params[i].name);
            inner.set(def->params[i].name, given ? *given
                                           : def->params[i].default_value
                                               ? eval(*def->params[i].default_value, inner)
                                               : Value::undefined("caller parameter missing"));
          }
          std::string text;
          exec(def->body, inner, text);
          return Value(std::move(text));
        }));
    return callee.fn().call(args);
  }

  // ---- expressions ------------------------------------------------------------------------
  CallArgs eval_args(const Expr& e, Frame& frame, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], frame));
    for (const auto& [k, v] : e.kwargs) a.named.emplace_back(k, eval(*v, frame));
    return a;
  }

  // A filter chain whose innermost operand is null applies to `operand`.
  Value apply_filters(const Expr& e, Value operand, Frame& frame) {
    Value inner = e.args[0] ? apply_filters(*e.args[0], std::move(operand), frame) : operand;
    return apply_filter(e.name, inner, eval_args(e, frame, 1));
  }

  static std::optional<int64_t> slice_bound(const Value& v, int line) {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) {
      throw TemplateError("template line " + std::to_string(line) +
                          ": slice indices must be integers or None");
    }
    return v.as_int();
  }

  Value eval(const Expr& e, Frame& frame) {
    Depth guard(*this, e.line);
    switch (e.kind) {
      case Expr::Kind::literal:
        return e.value;
      case Expr::Kind::name: {
        const Value* v = frame.find(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::list:
      case Expr::Kind::tuple: {
        Array a;
        a.reserve(e.args.size());
        for (const ExprPtr& x : e.args) a.push_back(eval(*x, frame));
        return Value::array(std::move(a), e.kind == Expr::Kind::tuple);
      }
      case Expr::Kind::dict: {
        Object o;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value k = eval(*e.args[i], frame);
          if (!k.is_string()) fail(e.line, "dict keys must be strings here");
          o.set(k.str(), eval(*e.args[i + 1], frame));
        }
        return Value::object(std::move(o));
      }
      case Expr::Kind::attr: {
        const Value obj = eval(*e.args[0], frame);
        if (obj.is_undefined()) throw_undefined(obj);
        return get_attr(obj, e.name);
      }
      case Expr::Kind::item: {
        const Value obj = eval(*e.args[0], frame);
        if (obj.is_undefined()) throw_undefined(obj);
        return get_item(obj, eval(*e.args[1], frame));
      }
      case Expr::Kind::slice: {
        const Value obj = eval(*e.args[0], frame);
        if (obj.is_undefined()) throw_undefined(obj);
        std::optional<int64_t> b[3];
        for (size_t i = 0; i < 3; ++i) {
          if (e.args[i + 1]) b[i] = slice_bound(eval(*e.args[i + 1], frame), e.line);
        }
        return get_slice(obj, b[0], b[1], b[2]);
      }
      case Expr::Kind::call: {
        const Value callee = eval(*e.args[0], frame);
        if (callee.is_undefined()) throw_undefined(callee);
        if (!callee.is_function())
          fail(e.line, "'" + type_name(callee) + "' object is not callable");
        return callee.fn().call(eval_args(e, frame, 1));
      }
      case Expr::Kind::filter:
        return apply_filter(e.name, eval(*e.args[0], frame), eval_args(e, frame, 1));
      case Expr::Kind::test: {
        const bool r = apply_test(e.name, eval(*e.args[0], frame), eval_args(e, frame, 1));
        return Value(r != e.negated);
      }
      case Expr::Kind::not_:
        return Value(!truthy(eval(*e.args[0], frame)));
      case Expr::Kind::neg:
      case Expr::Kind::pos: {
        const Value v = eval(*e.args[0], frame);
        if (v.is_undefined()) throw_undefined(v);
        if (!v.is_number()) fail(e.line, "bad operand type for unary -: '" + type_name(v) + "'");
        if (e.kind == Expr::Kind::pos) return v.is_bool() ? Value(v.as_int()) : v;
        if (v.is_float()) return Value(-v.as_double());
        if (v.as_int() == INT64_MIN) fail(e.line, "integer overflow");
        return Value(-v.as_int());
      }
      case Expr::Kind::binary:
        return binary_op(e.name, eval(*e.args[0], frame), eval(*e.args[1], frame));
      case Expr::Kind::concat: {
        std::string s;
        for (const ExprPtr& x : e.args) s += to_str(eval(*x, frame));
        return Value(std::move(s));
      }
      case Expr::Kind::compare: {
        Value left = eval(*e.args[0], frame);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], frame);
          const std::string& op = e.ops[i];
          bool r;
          if (op == "==") {
            r = equals(left, right);
          } else if (op == "!=") {
            r = !equals(left, right);
          } else if (op == "in") {
            r = contains(right, left);
          } else if (op == "notin") {
            r = !contains(right, left);
          } else {
            const int c = compare(left, right);
            r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
          }
          if (!r) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::and_: {
        Value l = eval(*e.args[0], frame);
        return truthy(l) ? eval(*e.args[1], frame) : l;
      }
      case Expr::Kind::or_: {
        Value l = eval(*e.args[0], frame);
        return truthy(l) ? l : eval(*e.args[1], frame);
      }
      case Expr::Kind::cond:
        if (truthy(eval(*e.args[1], frame))) return eval(*e.args[0], frame);
        if (e.args[2]) return eval(*e.args[2], frame);
        return Value::undefined("the inline if expression has no else branch");
    }
    return Value();
  }

  const RenderOptions& opts_;
  Frame globals_;
  Frame root_;
  int depth_ = 0;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  size_t emitted_ = 0;
};

}  // namespace

std::string run_template(const Body& body, const Object& context, const RenderOptions& opts) {
  Interp in(context, opts);
  return in.run(body);
}

}  // namespace lift::tmpl
