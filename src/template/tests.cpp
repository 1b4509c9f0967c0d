// Jinja2's builtin tests (x is defined, x is string, ...).

#include "template/builtins.h"
#include "template/py_text.h"

namespace lift::tmpl {

namespace {

using TestFn = bool (*)(const Value&, const CallArgs&);

const Value& other(const CallArgs& a, std::string_view test) {
  const Value* v = a.get(0, "other");
  if (!v) throw TemplateError("test '" + std::string(test) + "' needs an argument");
  return *v;
}

bool t_defined(const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, const CallArgs&) { return v.is_none(); }
bool t_boolean(const Value& v, const CallArgs&) { return v.is_bool(); }
bool t_true(const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(const Value& v, const CallArgs&) { return v.is_int(); }
bool t_float(const Value& v, const CallArgs&) { return v.is_float(); }
bool t_number(const Value& v, const CallArgs&) { return v.is_number(); }
bool t_string(const Value& v, const CallArgs&) { return v.is_string(); }
bool t_mapping(const Value& v, const CallArgs&) { return v.is_object() && !v.is_namespace(); }
bool t_iterable(const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_array() || (v.is_object() && !v.is_namespace());
}
bool t_sequence(const Value& v, const CallArgs& a) { return t_iterable(v, a); }
bool t_callable(const Value& v, const CallArgs&) { return v.is_function(); }
bool t_escaped(const Value&, const CallArgs&) { return false; }
bool string_predicate(const Value& v, const std::string& method) {
  return get_attr(Value(to_str(v)), method).fn().call(CallArgs{}).as_bool();
}
bool t_lower(const Value& v, const CallArgs&) { return string_predicate(v, "islower"); }
bool t_upper(const Value& v, const CallArgs&) { return string_predicate(v, "isupper"); }
int64_t int_of(const Value& v, std::string_view test) {
  if (!v.is_int() && !v.is_bool()) {
    throw TemplateError("test '" + std::string(test) + "' needs an integer");
  }
  return v.as_int();
}
bool t_even(const Value& v, const CallArgs&) { return int_of(v, "even") % 2 == 0; }
bool t_odd(const Value& v, const CallArgs&) { return int_of(v, "odd") % 2 != 0; }
bool t_divisibleby(const Value& v, const CallArgs& a) {
  const int64_t d = int_of(other(a, "divisibleby"), "divisibleby");
  if (d == 0) throw TemplateError("integer division or modulo by zero");
  return int_of(v, "divisibleby") % d == 0;
}
bool t_eq(const Value& v, const CallArgs& a) { return equals(v, other(a, "eq")); }
bool t_ne(const Value& v, const CallArgs& a) { return !equals(v, other(a, "ne")); }
bool t_lt(const Value& v, const CallArgs& a) { return compare(v, other(a, "lt")) < 0; }
bool t_le(const Value& v, const CallArgs& a) { return compare(v, other(a, "le")) <= 0; }
bool t_gt(const Value& v, const CallArgs& a) { return compare(v, other(a, "gt")) > 0; }
bool t_ge(const Value& v, const CallArgs& a) { return compare(v, other(a, "ge")) >= 0; }
bool t_in(const Value& v, const CallArgs& a) { return contains(other(a, "in"), v); }
bool t_sameas(const Value& v, const CallArgs& a) {
  const Value& o = other(a, "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.is_bool()) return v.as_bool() == o.as_bool();
  if (v.is_array()) return &v.arr() == &o.arr();
  if (v.is_object()) return &v.obj() == &o.obj();
  return equals(v, o);
}

struct Entry {
  std::string_view name;
  TestFn fn;
};

constexpr Entry kTests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"integer", t_integer},
    {"float", t_float},
    {"number", t_number},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"callable", t_callable},
    {"escaped", t_escaped},
    {"lower", t_lower},
    {"upper", t_upper},
    {"even", t_even},
    {"odd", t_odd},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"sameas", t_sameas},
};

}  // namespace

bool is_test(std::string_view name) {
  for (const Entry& e : kTests) {
    if (e.name == name) return true;
  }
  return false;
}

bool apply_test(std::string_view name, const Value& v, const CallArgs& args) {
  for (const Entry& e : kTests) {
    if (e.name == name) return e.fn(v, args);
  }
  throw TemplateError("no test named '" + excerpt_utf8(name, 40) + "'");
}

}  // namespace lift::tmpl
