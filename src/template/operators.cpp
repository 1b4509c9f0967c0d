// Python's arithmetic, membership, indexing and slicing on template values.
#include <cmath>

#include "template/builtins.h"
#include "template/py_text.h"

namespace lift::tmpl {

namespace {

// Largest list or string `*` may build: repetition is the one operator whose output is
// not bounded by its operands.
constexpr int64_t kMaxRepeatBytes = int64_t{1} << 24;

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  throw TemplateError("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) +
                      "' and '" + type_name(b) + "'");
}

// Python integers do not overflow; lift's are 64-bit and say so instead of wrapping.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) throw TemplateError("integer overflow in template arithmetic");
  return r;
}
bool add(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

Value repeat(const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value("") : Value::array({}, seq.is_tuple());
  if (seq.is_string()) {
    if (static_cast<int64_t>(seq.str().size()) * n > kMaxRepeatBytes) {
      throw TemplateError("string repetition too large");
    }
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  if (static_cast<int64_t>(seq.arr().size()) * n > kMaxRepeatBytes / 16) {
    throw TemplateError("list repetition too large");
  }
  Array out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.arr().begin(), seq.arr().end());
  return Value::array(std::move(out), seq.is_tuple());
}

int64_t floor_div(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) throw TemplateError("integer overflow in template arithmetic");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// "fmt" % args for the conversions templates use: %s, %d/%i, %r and %%.
Value format_percent(const std::string& fmt, const Value& args) {
  Array items = args.is_tuple() ? args.arr() : Array{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i == fmt.size()) throw TemplateError("incomplete format");
    const char c = fmt[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (c != 's' && c != 'd' && c != 'i' && c != 'r') {
      throw TemplateError(std::string("unsupported format character '") + c + "' in %-format");
    }
    if (next == items.size()) throw TemplateError("not enough arguments for format string");
    const Value& v = items[next++];
    if (c == 's') {
      out += to_str(v);
    } else if (c == 'r') {
      out += repr(v);
    } else if (v.is_number()) {
      out += std::to_string(v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int());
    } else {
      throw TemplateError("%d format: a real number is required, not " + type_name(v));
    }
  }
  if (next != items.size())
    throw TemplateError("not all arguments converted during string formatting");
  return Value(std::move(out));
}

}  // namespace

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value(checked(add, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
      Array out = a.arr();
      out.insert(out.end(), b.arr().begin(), b.arr().end());
      return Value::array(std::move(out), a.is_tuple());
    }
    if (a.is_string() && !b.is_undefined() && !a.is_undefined()) {
      throw TemplateError("can only concatenate str (not \"" + type_name(b) + "\") to str");
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value(checked(sub, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value(checked(mul, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_array()) && (b.is_int() || b.is_bool()))
      return repeat(a, b.as_int());
    if ((b.is_string() || b.is_array()) && (a.is_int() || a.is_bool()))
      return repeat(b, a.as_int());
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0) throw TemplateError("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (!nums) {
      if (op == "%" && a.is_string()) return format_percent(a.str(), b);
      unsupported(op, a, b);
    }
    if (b.as_double() == 0) throw TemplateError("integer division or modulo by zero");
    if (ints) {
      const int64_t q = floor_div(a.as_int(), b.as_int());
      if (op == "//") return Value(q);
      return Value(a.as_int() - q * b.as_int());
    }
    const double x = a.as_double(), y = b.as_double();
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value(m);
    return Value(std::floor((x - m) / y + 0.0));
  }
  if (op == "**") {
    if (!nums) unsupported(op, a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) acc = checked(mul, acc, base);
        e >>= 1;
        if (e > 0) base = checked(mul, base, base);
      }
      return Value(acc);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  throw TemplateError("unknown operator " + std::string(op));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::string:
      if (!item.is_string()) {
        if (item.is_undefined()) throw_undefined(item);
        throw TemplateError("'in <string>' requires string as left operand, not " +
                            type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::array:
      for (const Value& x : container.arr()) {
        if (equals(x, item)) return true;
      }
      return false;
    case Value::Kind::object:
      return item.is_string() && container.obj().find(item.str()) != nullptr;
    case Value::Kind::undefined:
      return false;
    default:
      throw TemplateError("argument of type '" + type_name(container) + "' is not iterable");
  }
}

Value get_item(const Value& obj, const Value& key) {
  if ((key.is_int() || key.is_bool()) && (obj.is_array() || obj.is_string())) {
    int64_t i = key.as_int();
    if (obj.is_array()) {
      const auto n = static_cast<int64_t>(obj.arr().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined(type_name(obj) + " index out of range");
      return obj.arr()[static_cast<size_t>(i)];
    }
    const std::vector<char32_t> cps = decode_utf8(obj.str());
    const auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("string index out of range");
    return Value(encode_utf8(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
  }
  if (obj.is_object() && !obj.is_namespace() && key.is_string()) {
    if (const Value* v = obj.obj().find(key.str())) return *v;
  }
  if (key.is_string()) return get_attr(obj, key.str());
  std::string hint = type_name(obj);
  hint += " object has no element ";
  hint += repr(key);
  return Value::undefined(std::move(hint));
}

namespace {

// Python's slice.indices(): resolved start, stop, step for a sequence of length n.
void resolve(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
             std::optional<int64_t> step, int64_t& b, int64_t& e, int64_t& s) {
  s = step.value_or(1);
  if (s == 0) throw TemplateError("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = s < 0 ? -1 : 0;
    } else if (x >= n) {
      x = s < 0 ? n - 1 : n;
    }
    return x;
  };
  b = clamp(start, s < 0 ? n - 1 : 0);
  e = clamp(stop, s < 0 ? -1 : n);
}

}  // namespace

Value get_slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
                std::optional<int64_t> step) {
  int64_t b = 0, e = 0, s = 1;
  if (obj.is_array()) {
    resolve(static_cast<int64_t>(obj.arr().size()), start, stop, step, b, e, s);
    Array out;
    for (int64_t i = b; s > 0 ? i < e : i > e; i += s)
      out.push_back(obj.arr()[static_cast<size_t>(i)]);
    return Value::array(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    const std::vector<char32_t> cps = decode_utf8(obj.str());
    resolve(static_cast<int64_t>(cps.size()), start, stop, step, b, e, s);
    std::string out;
    for (int64_t i = b; s > 0 ? i < e : i > e; i += s)
      append_utf8(out, cps[static_cast<size_t>(i)]);
    return Value(std::move(out));
  }
  throw TemplateError("'" + type_name(obj) + "' object is not subscriptable");
}

}  // namespace lift::tmpl
