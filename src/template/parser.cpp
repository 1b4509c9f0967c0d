#include "template/parser.h"

#include <initializer_list>

#include "template/builtins.h"
#include "template/lexer.h"
#include "template/py_text.h"

namespace lift::tmpl {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse() {
    std::string hit;
    Body b = subparse({}, &hit);
    return b;
  }

 private:
  // ---- token helpers ----------------------------------------------------------------------
  const Token& peek(size_t k = 0) const {
    const size_t i = p_ + k;
    return i < t_.size() ? t_[i] : t_.back();
  }
  Token next() {
    Token t = peek();
    if (p_ < t_.size() - 1) ++p_;
    return t;
  }
  bool at_op(std::string_view s, size_t k = 0) const {
    return peek(k).kind == TokKind::op && peek(k).text == s;
  }
  bool at_name(std::string_view s, size_t k = 0) const {
    return peek(k).kind == TokKind::name && peek(k).text == s;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError("template line " + std::to_string(peek().line) + ": " + what);
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case TokKind::eof:
        return "end of template";
      case TokKind::block_end:
        return "end of statement block";
      case TokKind::var_end:
        return "end of print statement";
      case TokKind::text:
        return "template text";
      default:
        return "'" + excerpt_utf8(t.text, 40) + "'";
    }
  }
  void expect_op(std::string_view s) {
    if (!at_op(s)) fail("expected '" + std::string(s) + "', got " + describe(peek()));
    next();
  }
  std::string expect_name() {
    if (peek().kind != TokKind::name) fail("expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != TokKind::block_end) {
      fail("expected end of statement block, got " + describe(peek()));
    }
    next();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) {
        p_.fail("template nests deeper than " + std::to_string(kMaxParseDepth) + " levels");
      }
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  ExprPtr make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = peek().line;
    return e;
  }

  // ---- statements -------------------------------------------------------------------------
  // Parses until a block tag whose name is in `ends`; that name is consumed and stored in
  // *hit (the rest of its tag is left to the caller).
  Body subparse(std::initializer_list<std::string_view> ends, std::string* hit) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokKind::eof) {
        for (std::string_view e : ends) {
          if (e.starts_with("end")) {
            fail("unexpected end of template, expected '" + std::string(e) + "'");
          }
        }
        return body;
      }
      if (t.kind == TokKind::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::text;
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (t.kind == TokKind::var_begin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::output;
        s->line = peek().line;
        s->expr = parse_tuple(true, false);
        if (peek().kind != TokKind::var_end) {
          fail("expected end of print statement, got " + describe(peek()));
        }
        next();
        body.push_back(std::move(s));
      } else if (t.kind == TokKind::block_begin) {
        next();
        if (peek().kind != TokKind::name) fail("expected a statement name");
        const std::string name = peek().text;
        for (std::string_view e : ends) {
          if (name == e) {
            next();
            *hit = name;
            return body;
          }
        }
        body.push_back(statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  StmtPtr statement() {
    auto s = std::make_unique<Stmt>();
    s->line = peek().line;
    const std::string name = next().text;
    if (name == "if") {
      s->kind = Stmt::Kind::if_;
      while (true) {
        s->conds.push_back(parse_tuple(false, false));
        expect_block_end();
        std::string hit;
        s->bodies.push_back(subparse({"elif", "else", "endif"}, &hit));
        if (hit == "elif") continue;
        if (hit == "else") {
          expect_block_end();
          s->else_body = subparse({"endif"}, &hit);
        }
        expect_block_end();
        return s;
      }
    }
    if (name == "for") {
      s->kind = Stmt::Kind::for_;
      s->targets = assign_targets();
      if (!at_name("in")) fail("expected 'in' in a for loop");
      next();
      s->expr = parse_tuple(false, false);
      if (at_name("if")) {
        next();
        s->cond = parse_expression(true);
      }
      if (at_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      std::string hit;
      s->body = subparse({"endfor", "else"}, &hit);
      if (hit == "else") {
        expect_block_end();
        s->else_body = subparse({"endfor"}, &hit);
      }
      expect_block_end();
      return s;
    }
    if (name == "set") {
      if (peek().kind == TokKind::name && at_op(".", 1)) {
        s->kind = Stmt::Kind::set;
        s->targets.push_back(next().text);
        next();
        s->text = expect_name();
        expect_op("=");
        s->expr = parse_tuple(true, false);
        expect_block_end();
        return s;
      }
      s->targets = assign_targets();
      if (at_op("=")) {
        next();
        s->kind = Stmt::Kind::set;
        s->expr = parse_tuple(true, false);
        expect_block_end();
        return s;
      }
      s->kind = Stmt::Kind::set_block;
      if (s->targets.size() != 1) fail("a block set assigns one name");
      if (at_op("|")) s->expr = filter_chain();
      expect_block_end();
      std::string hit;
      s->body = subparse({"endset"}, &hit);
      expect_block_end();
      return s;
    }
    if (name == "macro") {
      s->kind = Stmt::Kind::macro;
      s->name = expect_name();
      s->params = macro_params();
      expect_block_end();
      std::string hit;
      s->body = subparse({"endmacro"}, &hit);
      if (peek().kind == TokKind::name) next();
      expect_block_end();
      return s;
    }
    if (name == "call") {
      s->kind = Stmt::Kind::call_block;
      if (at_op("(")) s->params = macro_params();
      s->expr = parse_expression(true);
      if (s->expr->kind != Expr::Kind::call) fail("expected a call after {% call %}");
      expect_block_end();
      std::string hit;
      s->body = subparse({"endcall"}, &hit);
      expect_block_end();
      return s;
    }
    if (name == "filter") {
      s->kind = Stmt::Kind::filter_block;
      s->expr = filter_chain(false);
      expect_block_end();
      std::string hit;
      s->body = subparse({"endfilter"}, &hit);
      expect_block_end();
      return s;
    }
    if (name == "break" || name == "continue") {
      s->kind = name == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      expect_block_end();
      return s;
    }
    if (name == "generation") {
      // HF's AssistantTracker marks assistant text for masks; rendering is unchanged.
      s->kind = Stmt::Kind::scope;
      expect_block_end();
      std::string hit;
      s->body = subparse({"endgeneration"}, &hit);
      expect_block_end();
      return s;
    }
    fail("unsupported statement '" + excerpt_utf8(name, 40) + "'");
  }

  std::vector<std::string> assign_targets() {
    std::vector<std::string> names;
    const bool paren = at_op("(");
    if (paren) next();
    names.push_back(expect_name());
    while (at_op(",")) {
      next();
      if (peek().kind != TokKind::name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  std::vector<MacroParam> macro_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!at_op(")")) {
      if (!params.empty()) expect_op(",");
      if (at_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (at_op("=")) {
        next();
        p.default_value = parse_expression(true);
      }
      params.push_back(std::move(p));
    }
    next();
    return params;
  }

  // "| f(args) | g" after a block set, or "f(args) | g" in {% filter %}; the innermost
  // operand is left null (it is the rendered body).
  ExprPtr filter_chain(bool leading_pipe = true) {
    ExprPtr node;
    if (leading_pipe) expect_op("|");
    node = filter(nullptr);
    while (at_op("|")) {
      next();
      node = filter(std::move(node));
    }
    return node;
  }

  // ---- expressions ------------------------------------------------------------------------
  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? condexpr() : or_expr();
  }

  ExprPtr condexpr() {
    ExprPtr e = or_expr();
    while (at_name("if")) {
      auto c = make(Expr::Kind::cond);
      next();
      c->args.push_back(std::move(e));
      c->args.push_back(or_expr());
      if (at_name("else")) {
        next();
        c->args.push_back(condexpr());
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (at_name("or")) {
      auto n = make(Expr::Kind::or_);
      next();
      n->args.push_back(std::move(e));
      n->args.push_back(and_expr());
      e = std::move(n);
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (at_name("and")) {
      auto n = make(Expr::Kind::and_);
      next();
      n->args.push_back(std::move(e));
      n->args.push_back(not_expr());
      e = std::move(n);
    }
    return e;
  }

  ExprPtr not_expr() {
    if (at_name("not")) {
      DepthGuard guard(*this);
      auto n = make(Expr::Kind::not_);
      next();
      n->args.push_back(not_expr());
      return n;
    }
    return compare();
  }

  ExprPtr compare() {
    ExprPtr first = math1();
    ExprPtr node;
    while (true) {
      std::string op;
      if (peek().kind == TokKind::op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!node) {
        node = make(Expr::Kind::compare);
        node->args.push_back(std::move(first));
      }
      node->ops.push_back(op);
      node->args.push_back(math1());
    }
    return node ? std::move(node) : std::move(first);
  }

  ExprPtr binary_loop(ExprPtr (Parser::*sub)(), std::initializer_list<std::string_view> ops) {
    ExprPtr e = (this->*sub)();
    while (true) {
      bool matched = false;
      for (std::string_view op : ops) {
        if (at_op(op)) {
          auto n = make(Expr::Kind::binary);
          n->name = next().text;
          n->args.push_back(std::move(e));
          n->args.push_back((this->*sub)());
          e = std::move(n);
          matched = true;
          break;
        }
      }
      if (!matched) return e;
    }
  }

  ExprPtr math1() { return binary_loop(&Parser::concat, {"+", "-"}); }

  ExprPtr concat() {
    ExprPtr e = math2();
    if (!at_op("~")) return e;
    auto n = make(Expr::Kind::concat);
    n->args.push_back(std::move(e));
    while (at_op("~")) {
      next();
      n->args.push_back(math2());
    }
    return n;
  }

  ExprPtr math2() { return binary_loop(&Parser::pow_expr, {"*", "/", "//", "%"}); }
  ExprPtr pow_expr() { return binary_loop(&Parser::unary_filtered, {"**"}); }
  ExprPtr unary_filtered() { return unary(true); }

  ExprPtr unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      node = make(at_op("-") ? Expr::Kind::neg : Expr::Kind::pos);
      next();
      node->args.push_back(unary(false));
    } else {
      node = postfix(primary());
    }
    if (with_filter) node = filter_expr(std::move(node));
    return node;
  }

  ExprPtr primary() {
    const Token& t = peek();
    if (t.kind == TokKind::name) {
      const std::string n = next().text;
      auto e = make(Expr::Kind::literal);
      if (n == "true" || n == "True") {
        e->value = Value(true);
      } else if (n == "false" || n == "False") {
        e->value = Value(false);
      } else if (n == "none" || n == "None") {
        e->value = Value::none();
      } else {
        e->kind = Expr::Kind::name;
        e->name = n;
      }
      return e;
    }
    if (t.kind == TokKind::string) {
      std::string s;
      while (peek().kind == TokKind::string) s += next().text;
      auto e = make(Expr::Kind::literal);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.kind == TokKind::integer || t.kind == TokKind::floating) {
      auto e = make(Expr::Kind::literal);
      const Token n = next();
      e->value = n.kind == TokKind::integer ? Value(n.int_value) : Value(n.float_value);
      return e;
    }
    if (at_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true);
      expect_op(")");
      return e;
    }
    if (at_op("[")) {
      auto e = make(Expr::Kind::list);
      next();
      while (!at_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (at_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    if (at_op("{")) {
      auto e = make(Expr::Kind::dict);
      next();
      while (!at_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (at_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    fail("unexpected " + describe(t));
  }

  bool tuple_end() const {
    const TokKind k = peek().kind;
    return k == TokKind::var_end || k == TokKind::block_end || at_op(")");
  }

  // A comma-separated list becomes a tuple; a single expression stays itself.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens) {
    auto tuple = make(Expr::Kind::tuple);
    bool is_tuple = false;
    while (true) {
      if (!tuple->args.empty()) expect_op(",");
      if (tuple_end()) break;
      tuple->args.push_back(parse_expression(with_condexpr));
      if (at_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!tuple->args.empty()) return std::move(tuple->args[0]);
      if (!explicit_parens) fail("expected an expression, got " + describe(peek()));
    }
    return tuple;
  }

  ExprPtr postfix(ExprPtr node) {
    while (true) {
      if (at_op(".")) {
        next();
        if (peek().kind == TokKind::name) {
          auto e = make(Expr::Kind::attr);
          e->name = next().text;
          e->args.push_back(std::move(node));
          node = std::move(e);
        } else if (peek().kind == TokKind::integer) {
          auto e = make(Expr::Kind::item);
          auto idx = make(Expr::Kind::literal);
          idx->value = Value(next().int_value);
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(idx));
          node = std::move(e);
        } else {
          fail("expected an attribute name after '.'");
        }
      } else if (at_op("[")) {
        next();
        node = subscript(std::move(node));
        expect_op("]");
      } else if (at_op("(")) {
        node = call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj) {
    ExprPtr start;
    if (!at_op(":")) {
      start = parse_expression(true);
      if (!at_op(":")) {
        auto e = make(Expr::Kind::item);
        e->args.push_back(std::move(obj));
        e->args.push_back(std::move(start));
        return e;
      }
    }
    auto e = make(Expr::Kind::slice);
    next();  // ':'
    ExprPtr stop, step;
    if (!at_op("]") && !at_op(":")) stop = parse_expression(true);
    if (at_op(":")) {
      next();
      if (!at_op("]")) step = parse_expression(true);
    }
    e->args.push_back(std::move(obj));
    e->args.push_back(std::move(start));
    e->args.push_back(std::move(stop));
    e->args.push_back(std::move(step));
    return e;
  }

  void call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!at_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (at_op(")")) break;
      if (at_op("*") || at_op("**")) fail("*args and **kwargs in calls are not supported");
      if (peek().kind == TokKind::name && at_op("=", 1)) {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("positional argument after a keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr call(ExprPtr callee) {
    auto e = make(Expr::Kind::call);
    e->args.push_back(std::move(callee));
    call_args(*e);
    return e;
  }

  ExprPtr filter(ExprPtr operand) {
    auto e = make(Expr::Kind::filter);
    e->name = expect_name();
    if (!is_filter(e->name)) fail("no filter named '" + excerpt_utf8(e->name, 40) + "'");
    e->args.push_back(std::move(operand));
    if (at_op("(")) call_args(*e);
    return e;
  }

  ExprPtr filter_expr(ExprPtr node) {
    while (true) {
      if (at_op("|")) {
        next();
        node = filter(std::move(node));
      } else if (at_name("is")) {
        next();
        auto e = make(Expr::Kind::test);
        if (at_name("not")) {
          next();
          e->negated = true;
        }
        e->name = expect_name();
        if (!is_test(e->name)) fail("no test named '" + excerpt_utf8(e->name, 40) + "'");
        e->args.push_back(std::move(node));
        const TokKind k = peek().kind;
        if (at_op("(")) {
          call_args(*e);
        } else if ((k == TokKind::name || k == TokKind::string || k == TokKind::integer ||
                    k == TokKind::floating || at_op("[") || at_op("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and")) {
          if (at_name("is")) fail("you cannot chain multiple tests with is");
          e->args.push_back(postfix(primary()));
        }
        node = std::move(e);
      } else if (at_op("(")) {
        node = call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(lex(source)).parse(); }

}  // namespace lift::tmpl
