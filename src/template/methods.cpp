// Attribute access: the methods of str, dict and list a template may call (Jinja2's
// ImmutableSandboxedEnvironment refuses the mutating ones), dict keys and namespace
// attributes.
#include <array>

#include "template/builtins.h"
#include "template/py_text.h"

namespace lift::tmpl {

namespace {

std::optional<std::string> opt_string(const CallArgs& a, size_t pos, std::string_view name,
                                      const char* method) {
  const Value* v = a.get(pos, name);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) {
    throw TemplateError(std::string(method) + "() argument must be str or None, not " +
                        type_name(*v));
  }
  return v->str();
}

const std::string& need_string(const CallArgs& a, size_t pos, std::string_view name,
                               const char* method) {
  const Value* v = a.get(pos, name);
  if (!v || !v->is_string()) {
    throw TemplateError(std::string(method) + "() needs a string argument");
  }
  return v->str();
}

int64_t opt_int(const CallArgs& a, size_t pos, std::string_view name, int64_t def) {
  const Value* v = a.get(pos, name);
  if (!v || v->is_none()) return def;
  if (!v->is_int() && !v->is_bool()) throw TemplateError("an integer argument is required");
  return v->as_int();
}

Value strings(const std::vector<std::string>& parts) {
  Array a;
  a.reserve(parts.size());
  for (const auto& p : parts) a.emplace_back(p);
  return Value::array(std::move(a));
}

// startswith/endswith take a string or a tuple of strings.
bool affix(const std::string& s, const Value& arg, bool prefix) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) throw TemplateError("startswith/endswith need str or a tuple of str");
    const std::string& p = v.str();
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0
                  : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (arg.is_array()) {
    for (const Value& v : arg.arr()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(arg);
}

template <typename Pred>
bool all_chars(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}

Value string_method(const std::string& self, const std::string& name, const CallArgs& a) {
  const char* m = name.c_str();
  if (name == "strip") return Value(py_strip(self, opt_string(a, 0, "chars", m), true, true));
  if (name == "lstrip") return Value(py_strip(self, opt_string(a, 0, "chars", m), true, false));
  if (name == "rstrip") return Value(py_strip(self, opt_string(a, 0, "chars", m), false, true));
  if (name == "split") {
    return strings(py_split(self, opt_string(a, 0, "sep", m), opt_int(a, 1, "maxsplit", -1)));
  }
  if (name == "rsplit") {
    return strings(py_rsplit(self, opt_string(a, 0, "sep", m), opt_int(a, 1, "maxsplit", -1)));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* arg = a.get(0, "prefix");
    if (!arg) throw TemplateError(name + "() takes at least 1 argument");
    return Value(affix(self, *arg, name == "startswith"));
  }
  if (name == "replace") {
    return Value(py_replace(self, need_string(a, 0, "old", m), need_string(a, 1, "new", m),
                            opt_int(a, 2, "count", -1)));
  }
  if (name == "upper") return Value(py_upper(self));
  if (name == "lower") return Value(py_lower(self));
  if (name == "title") return Value(py_title(self));
  if (name == "capitalize") return Value(py_capitalize(self));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string& sub = need_string(a, 0, "sub", m);
    const size_t at = name[0] == 'r' ? self.rfind(sub) : self.find(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") throw TemplateError("substring not found");
      return Value(-1);
    }
    return Value(static_cast<int64_t>(count_code_points(std::string_view(self).substr(0, at))));
  }
  if (name == "count") {
    const std::string& sub = need_string(a, 0, "sub", m);
    if (sub.empty()) return Value(static_cast<int64_t>(count_code_points(self) + 1));
    int64_t n = 0;
    for (size_t p = self.find(sub); p != std::string::npos; p = self.find(sub, p + sub.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    const Value* it = a.get(0, "iterable");
    if (!it) throw TemplateError("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*it)) {
      if (!v.is_string())
        throw TemplateError("sequence item: expected str instance, " + type_name(v) + " found");
      if (!first) out += self;
      first = false;
      out += v.str();
    }
    return Value(std::move(out));
  }
  if (name == "splitlines") {
    std::vector<std::string> parts;
    std::string cur;
    for (size_t i = 0; i < self.size(); ++i) {
      if (self[i] == '\n' || self[i] == '\r') {
        parts.push_back(cur);
        cur.clear();
        if (self[i] == '\r' && i + 1 < self.size() && self[i + 1] == '\n') ++i;
      } else {
        cur += self[i];
      }
    }
    if (!cur.empty()) parts.push_back(cur);
    return strings(parts);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& x = need_string(a, 0, "prefix", m);
    if (name == "removeprefix" && self.compare(0, x.size(), x) == 0)
      return Value(self.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && self.size() >= x.size() &&
        self.compare(self.size() - x.size(), x.size(), x) == 0) {
      return Value(self.substr(0, self.size() - x.size()));
    }
    return Value(self);
  }
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (name == "isdigit") return Value(all_chars(self, digit));
  if (name == "isalpha") return Value(all_chars(self, alpha));
  if (name == "isalnum")
    return Value(all_chars(self, [&](char c) { return digit(c) || alpha(c); }));
  if (name == "isspace") {
    return Value(!self.empty() && py_strip(self, std::nullopt, true, true).empty());
  }
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (char c : self) {
      const bool lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
      if ((name == "islower" && up) || (name == "isupper" && lo)) return Value(false);
      cased = cased || lo || up;
    }
    return Value(cased);
  }
  throw TemplateError("str has no method '" + name + "'");
}

constexpr std::array<std::string_view, 24> kStringMethods{
    "strip",      "lstrip",       "rstrip",       "split",   "rsplit",  "startswith",
    "endswith",   "replace",      "upper",        "lower",   "title",   "capitalize",
    "find",       "rfind",        "index",        "rindex",  "count",   "join",
    "splitlines", "removeprefix", "removesuffix", "isdigit", "isalpha", "isalnum"};
constexpr std::array<std::string_view, 3> kMoreStringMethods{"isspace", "islower", "isupper"};

bool is_string_method(std::string_view n) {
  for (auto m : kStringMethods) {
    if (m == n) return true;
  }
  for (auto m : kMoreStringMethods) {
    if (m == n) return true;
  }
  return false;
}

[[noreturn]] void unsafe(const Value& obj, const std::string& name) {
  throw TemplateError("access to attribute '" + name + "' of '" + type_name(obj) +
                      "' object is unsafe");
}

Value bound(const Value& self, const std::string& name,
            Value (*fn)(const Value&, const std::string&, const CallArgs&)) {
  return Value::function(name, [self, name, fn](const CallArgs& a) { return fn(self, name, a); });
}

Value dict_method(const Value& self, const std::string& name, const CallArgs& a) {
  const Object& o = self.obj();
  if (name == "get") {
    const Value* k = a.get(0, "key");
    if (!k) throw TemplateError("get expected at least 1 argument");
    if (k->is_string()) {
      if (const Value* v = o.find(k->str())) return *v;
    }
    const Value* d = a.get(1, "default");
    return d ? *d : Value::none();
  }
  Array out;
  for (const auto& [k, v] : o.items) {
    if (name == "keys") {
      out.emplace_back(k);
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::array({Value(k), v}, true));
    }
  }
  return Value::array(std::move(out));
}

Value list_method(const Value& self, const std::string& name, const CallArgs& a) {
  const Value* x = a.get(0, "value");
  if (!x) throw TemplateError(name + "() takes exactly one argument");
  int64_t n = 0, i = 0;
  for (const Value& v : self.arr()) {
    if (equals(v, *x)) {
      if (name == "index") return Value(i);
      ++n;
    }
    ++i;
  }
  if (name == "index") throw TemplateError("list.index(x): x not in list");
  return Value(n);
}

Value call_string_method(const Value& self, const std::string& name, const CallArgs& a) {
  return string_method(self.str(), name, a);
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name, bool with_keys) {
  switch (obj.kind()) {
    case Value::Kind::undefined:
      throw_undefined(obj);
    case Value::Kind::string:
      if (is_string_method(name)) return bound(obj, name, call_string_method);
      break;
    case Value::Kind::object:
      if (obj.is_namespace()) {
        if (const Value* v = obj.obj().find(name)) return *v;
        break;
      }
      if (name == "get" || name == "keys" || name == "values" || name == "items") {
        return bound(obj, name, dict_method);
      }
      if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
          name == "clear") {
        unsafe(obj, name);
      }
      if (!with_keys) break;
      if (const Value* v = obj.obj().find(name)) return *v;
      break;
    case Value::Kind::array:
      if (name == "index" || name == "count") return bound(obj, name, list_method);
      if (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
          name == "remove" || name == "sort" || name == "reverse" || name == "clear") {
        unsafe(obj, name);
      }
      break;
    default:
      break;
  }
  std::string hint = type_name(obj);
  hint += " object has no attribute '";
  hint += name;
  hint += "'";
  return Value::undefined(std::move(hint));
}

}  // namespace lift::tmpl
