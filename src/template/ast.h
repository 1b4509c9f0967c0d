// The syntax tree of a parsed template: expressions and statements, as plain structs the
// interpreter walks.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace lift::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,  // value
    name,     // name
    list,     // args: elements
    tuple,    // args: elements
    dict,     // args: key, value, key, value, ...
    attr,     // args[0].name
    item,     // args[0][args[1]]
    slice,    // args[0][args[1]:args[2]:args[3]] (null parts absent)
    call,     // args[0](args[1..], kwargs)
    filter,   // args[0] | name(args[1..], kwargs); args[0] null inside {% filter %}
    test,     // args[0] is [not] name(args[1..], kwargs)
    not_,     // not args[0]
    neg,      // -args[0]
    pos,      // +args[0]
    binary,   // args[0] name args[1]: + - * / // % **
    concat,   // args joined with ~
    compare,  // args[0] ops[0] args[1] ops[1] args[2] ...
    and_,
    or_,
    cond,  // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind {
    text,          // text
    output,        // {{ expr }}
    if_,           // conds[i] -> bodies[i]; else_body
    for_,          // targets in expr [if cond]: body; else_body
    set,           // targets = expr, or target.attr (ns) = expr
    set_block,     // {% set targets %}body{% endset %} (optional filter in expr)
    macro,         // name(params): body
    call_block,    // {% call(params) expr %}body{% endcall %}
    filter_block,  // {% filter expr %}body{% endfilter %}
    break_,
    continue_,
    scope,  // a body run in place ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;                  // text; set: namespace attribute (with targets[0])
  std::string name;                  // macro name
  std::vector<std::string> targets;  // for / set targets
  ExprPtr expr;                      // output, for iterable, set value, call, filter
  ExprPtr cond;                      // for ... if cond
  std::vector<ExprPtr> conds;        // if / elif conditions
  std::vector<Body> bodies;          // if / elif bodies
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
};

}  // namespace lift::tmpl
