#include "template/value.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "template/py_text.h"

namespace lift::tmpl {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

const Value* CallArgs::get(size_t pos, std::string_view name) const {
  if (pos < positional.size()) return &positional[pos];
  for (const auto& [k, v] : named) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value::Value(bool b) : kind_(Kind::boolean), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::integer), i_(i) {}
Value::Value(double d) : kind_(Kind::floating), f_(d) {}
Value::Value(std::string s)
    : kind_(Kind::string), s_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::array(Array a, bool tuple) {
  Value v;
  v.kind_ = Kind::array;
  v.flag_ = tuple;
  v.a_ = std::make_shared<const Array>(std::move(a));
  return v;
}

Value Value::object(Object o, bool ns) {
  Value v;
  v.kind_ = Kind::object;
  v.flag_ = ns;
  v.o_ = std::make_shared<Object>(std::move(o));
  return v;
}

Value Value::function(std::string name, std::function<Value(const CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::function;
  v.fn_ = std::make_shared<const Function>(Function{std::move(name), std::move(fn)});
  return v;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return "Undefined";
    case Value::Kind::none:
      return "NoneType";
    case Value::Kind::boolean:
      return "bool";
    case Value::Kind::integer:
      return "int";
    case Value::Kind::floating:
      return "float";
    case Value::Kind::string:
      return "str";
    case Value::Kind::array:
      return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::object:
      return v.is_namespace() ? "Namespace" : "dict";
    case Value::Kind::function:
      return "function";
  }
  return "object";
}

void throw_undefined(const Value& v) {
  // An Undefined carries the hint saying why it is undefined ("'x' is undefined").
  const bool hinted = v.is_undefined() && v.has_hint();
  throw TemplateError(hinted ? v.str() : std::string("value is undefined"));
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return false;
    case Value::Kind::boolean:
      return v.as_bool();
    case Value::Kind::integer:
      return v.as_int() != 0;
    case Value::Kind::floating:
      return v.as_double() != 0.0;
    case Value::Kind::string:
      return !v.str().empty();
    case Value::Kind::array:
      return !v.arr().empty();
    case Value::Kind::object:
      return v.is_namespace() || !v.obj().items.empty();
    case Value::Kind::function:
      return true;
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return "";
    case Value::Kind::string:
      return v.str();
    default:
      return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return "";
    case Value::Kind::none:
      return "None";
    case Value::Kind::boolean:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::integer:
      return std::to_string(v.as_int());
    case Value::Kind::floating:
      return py_float_str(v.as_double());
    case Value::Kind::string:
      return py_repr_string(v.str());
    case Value::Kind::array: {
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < v.arr().size(); ++i) {
        if (i) out += ", ";
        out += repr(v.arr()[i]);
      }
      if (v.is_tuple() && v.arr().size() == 1) out += ",";
      out += v.is_tuple() ? ")" : "]";
      return out;
    }
    case Value::Kind::object: {
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, x] : v.obj().items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr_string(k) + ": " + repr(x);
      }
      out += v.is_namespace() ? "}>" : "}";
      return out;
    }
    case Value::Kind::function:
      return "<function " + v.fn().name + ">";
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return true;
    case Value::Kind::string:
      return a.str() == b.str();
    case Value::Kind::array:
      if (a.is_tuple() != b.is_tuple() || a.arr().size() != b.arr().size()) return false;
      for (size_t i = 0; i < a.arr().size(); ++i) {
        if (!equals(a.arr()[i], b.arr()[i])) return false;
      }
      return true;
    case Value::Kind::object: {
      if (a.is_namespace() || b.is_namespace()) return &a.obj() == &b.obj();
      if (a.obj().items.size() != b.obj().items.size()) return false;
      for (const auto& [k, x] : a.obj().items) {
        const Value* y = b.obj().find(k);
        if (!y || !equals(x, *y)) return false;
      }
      return true;
    }
    case Value::Kind::function:
      return &a.fn() == &b.fn();
    default:
      return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (y < x ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (y < x ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, which is what Python compares.
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
    const size_t n = std::min(a.arr().size(), b.arr().size());
    for (size_t i = 0; i < n; ++i) {
      if (!equals(a.arr()[i], b.arr()[i])) return compare(a.arr()[i], b.arr()[i]);
    }
    return a.arr().size() < b.arr().size() ? -1 : (a.arr().size() > b.arr().size() ? 1 : 0);
  }
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  throw TemplateError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                      type_name(b) + "'");
}

std::optional<int64_t> length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return 0;
    case Value::Kind::string:
      return static_cast<int64_t>(count_code_points(v.str()));
    case Value::Kind::array:
      return static_cast<int64_t>(v.arr().size());
    case Value::Kind::object:
      if (v.is_namespace()) return std::nullopt;
      return static_cast<int64_t>(v.obj().items.size());
    default:
      return std::nullopt;
  }
}

Array iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return {};
    case Value::Kind::array:
      return v.arr();
    case Value::Kind::object: {
      if (v.is_namespace()) break;
      Array keys;
      keys.reserve(v.obj().items.size());
      for (const auto& [k, x] : v.obj().items) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::string: {
      Array chars;
      std::string one;
      for (char32_t c : decode_utf8(v.str())) {
        one.clear();
        append_utf8(one, c);
        chars.emplace_back(one);
      }
      return chars;
    }
    default:
      break;
  }
  throw TemplateError("'" + type_name(v) + "' object is not iterable");
}

namespace {

template <typename Json>
Value convert_json(const Json& j) {
  using T = typename Json::value_t;
  switch (j.type()) {
    case T::null:
      return Value::none();
    case T::boolean:
      return Value(j.template get<bool>());
    case T::number_integer:
      return Value(j.template get<int64_t>());
    case T::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case T::number_float:
      return Value(j.template get<double>());
    case T::string:
      return Value(j.template get<std::string>());
    case T::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& x : j) a.push_back(convert_json(x));
      return Value::array(std::move(a));
    }
    case T::object: {
      Object o;
      o.items.reserve(j.size());
      for (const auto& [k, x] : j.items()) o.items.emplace_back(k, convert_json(x));
      return Value::object(std::move(o));
    }
    default:
      throw TemplateError("unsupported JSON value in template context");
  }
}

}  // namespace

Value from_json(const nlohmann::json& j) { return convert_json(j); }
Value from_json(const nlohmann::ordered_json& j) { return convert_json(j); }

namespace {

void dump(std::string& out, const Value& v, int indent, bool sort_keys, int depth) {
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(d), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::none:
      out += "null";
      return;
    case Value::Kind::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::integer:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::floating: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d < 0 ? "-Infinity" : "Infinity";
      } else {
        out += py_float_str(d);
      }
      return;
    }
    case Value::Kind::string:
      append_json_string(out, v.str());
      return;
    case Value::Kind::array: {
      if (v.arr().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.arr().size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        dump(out, v.arr()[i], indent, sort_keys, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::object: {
      if (v.is_namespace()) break;
      if (v.obj().items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.obj().items) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        append_json_string(out, items[i]->first);
        out += ": ";
        dump(out, items[i]->second, indent, sort_keys, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    default:
      break;
  }
  throw TemplateError("Object of type " + type_name(v) + " is not JSON serializable");
}

}  // namespace

std::string to_json(const Value& v, int indent, bool sort_keys) {
  std::string out;
  dump(out, v, indent, sort_keys, 0);
  return out;
}

}  // namespace lift::tmpl
