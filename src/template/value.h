// The values a chat template computes with: Python's None, bool, int, float, str, list,
// tuple and dict as Jinja2 sees them, Jinja2's Undefined, namespace() objects and callables
// (macros, builtins, bound methods). Lists and dicts are shared by reference, as in Python;
// the only mutation a template can make is `set ns.attr = ...` on a namespace.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/error.h"

namespace lift::tmpl {

// Every failure while parsing or rendering a template.
class TemplateError : public Error {
 public:
  using Error::Error;
};

// raise_exception("...") called by the template: the message is the template's own, meant
// for the client (a server answers 400 with it).
class TemplateRaise : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

class Value;
using Array = std::vector<Value>;

// A dict with insertion order, as Python's. Keys are strings (JSON objects and the dict
// literals templates write).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  // The argument at position `pos` or named `name`; nullptr when absent.
  const Value* get(size_t pos, std::string_view name) const;
};

struct Function {
  std::string name;
  std::function<Value(const CallArgs&)> call;
};

class Value {
 public:
  enum class Kind : uint8_t {
    undefined,
    none,
    boolean,
    integer,
    floating,
    string,
    array,
    object,
    function
  };

  Value() = default;  // undefined
  static Value undefined(std::string hint);
  static Value none();
  Value(bool b);                                        // NOLINT: implicit, like Python literals
  Value(int64_t i);                                     // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}      // NOLINT
  Value(double d);                                      // NOLINT
  Value(std::string s);                                 // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}       // NOLINT
  static Value array(Array a, bool tuple = false);
  static Value object(Object o, bool ns = false);
  static Value function(std::string name, std::function<Value(const CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_tuple() const { return kind_ == Kind::array && flag_; }
  bool is_object() const { return kind_ == Kind::object; }
  bool is_namespace() const { return kind_ == Kind::object && flag_; }
  bool is_function() const { return kind_ == Kind::function; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return is_bool() ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return is_float() ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return *s_; }  // string, or undefined's hint
  bool has_hint() const { return s_ != nullptr && !s_->empty(); }
  const Array& arr() const { return *a_; }
  const Object& obj() const { return *o_; }
  Object& mutable_obj() const { return *o_; }
  const Function& fn() const { return *fn_; }

 private:
  Kind kind_ = Kind::undefined;
  bool flag_ = false;  // array: tuple; object: namespace
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<const Function> fn_;
};

// Python's type names, for error messages ("str", "int", "list", "dict", "NoneType", ...).
std::string type_name(const Value& v);
// Throws jinja2's UndefinedError equivalent for an undefined value used where a value is
// needed.
[[noreturn]] void throw_undefined(const Value& v);

bool truthy(const Value& v);
// str(v) as Jinja2 prints it: Undefined prints as "", None as "None", lists as their repr.
std::string to_str(const Value& v);
std::string repr(const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python <: -1, 0, 1; throws TemplateError for values Python cannot order.
int compare(const Value& a, const Value& b);
// len(v) for strings (code points), lists, dicts; nullopt for values without a length.
std::optional<int64_t> length(const Value& v);
// The items a for loop visits: list elements, dict keys, string characters; Undefined is
// empty. Throws for values that are not iterable.
Array iterate(const Value& v);

Value from_json(const nlohmann::json& j);
// The same for insertion-ordered JSON, whose objects keep their keys' order (Python's
// dicts do: a client's tool schema prints in its own order).
Value from_json(const nlohmann::ordered_json& j);
// HF's tojson: json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort_keys).
// indent < 0: one line with ", " and ": " separators.
std::string to_json(const Value& v, int indent, bool sort_keys);

}  // namespace lift::tmpl
