// Jinja2's builtin filters as chat templates use them, with HF's tojson.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "template/builtins.h"
#include "template/py_text.h"

namespace lift::tmpl {

namespace {

using FilterFn = Value (*)(const Value&, const CallArgs&);

const Value* arg(const CallArgs& a, size_t pos, std::string_view name) { return a.get(pos, name); }

bool arg_bool(const CallArgs& a, size_t pos, std::string_view name, bool def) {
  const Value* v = arg(a, pos, name);
  return v ? truthy(*v) : def;
}

// Jinja2's attribute getter for map/selectattr/sort/...: "a.b.0" walks items by dots.
Value get_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  while (true) {
    const size_t dot = path.find('.', b);
    const std::string part = path.substr(b, dot == std::string::npos ? std::string::npos : dot - b);
    if (cur.is_undefined()) throw_undefined(cur);
    bool numeric = !part.empty();
    for (char c : part) numeric = numeric && c >= '0' && c <= '9';
    cur = numeric ? get_item(cur, Value(static_cast<int64_t>(std::atoll(part.c_str()))))
                  : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    b = dot + 1;
  }
}

std::string attribute_arg(const CallArgs& a, size_t pos) {
  const Value* v = arg(a, pos, "attribute");
  if (!v || v->is_none()) return "";
  return to_str(*v);
}

Value f_abs(const Value& v, const CallArgs&) {
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  throw TemplateError("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(const Value& v, const CallArgs& a) {
  const Value* n = arg(a, 0, "name");
  if (!n || !n->is_string()) throw TemplateError("attr filter needs a name");
  return get_attr(v, n->str(), /*with_keys=*/false);
}

Value f_capitalize(const Value& v, const CallArgs&) { return Value(py_capitalize(to_str(v))); }
Value f_lower(const Value& v, const CallArgs&) { return Value(py_lower(to_str(v))); }
Value f_upper(const Value& v, const CallArgs&) { return Value(py_upper(to_str(v))); }
Value f_string(const Value& v, const CallArgs&) { return Value(to_str(v)); }
Value f_safe(const Value& v, const CallArgs&) { return v; }

// Jinja2's title filter: each word (split at whitespace, '-', and opening brackets) gets
// its first character upper-cased and the rest lower-cased.
Value f_title(const Value& v, const CallArgs&) {
  const std::string s = to_str(v);
  std::string out;
  bool word_start = true;
  for (char c : s) {
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' ||
                     py_isspace(static_cast<unsigned char>(c));
    if (sep) {
      out += c;
      word_start = true;
    } else {
      const std::string one(1, c);
      out += word_start ? py_upper(one) : py_lower(one);
      word_start = false;
    }
  }
  return Value(std::move(out));
}

Value f_default(const Value& v, const CallArgs& a) {
  const Value* d = arg(a, 0, "default_value");
  const bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value("");
  return v;
}

Value f_escape(const Value& v, const CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value(std::move(out));
}

Value f_first(const Value& v, const CallArgs&) {
  const Array items = iterate(v);
  return items.empty() ? Value::undefined("no first item, sequence was empty") : items.front();
}

Value f_last(const Value& v, const CallArgs&) {
  const Array items = iterate(v);
  return items.empty() ? Value::undefined("no last item, sequence was empty") : items.back();
}

Value f_length(const Value& v, const CallArgs&) {
  const auto n = length(v);
  if (!n) throw TemplateError("object of type '" + type_name(v) + "' has no len()");
  return Value(*n);
}

Value f_list(const Value& v, const CallArgs&) { return Value::array(iterate(v)); }

Value f_items(const Value& v, const CallArgs&) {
  if (v.is_undefined()) return Value::array({});
  if (!v.is_object() || v.is_namespace())
    throw TemplateError("can only get item pairs from a mapping");
  Array out;
  for (const auto& [k, x] : v.obj().items) out.push_back(Value::array({Value(k), x}, true));
  return Value::array(std::move(out));
}

Value f_join(const Value& v, const CallArgs& a) {
  const Value* d = arg(a, 0, "d");
  const std::string sep = d ? to_str(*d) : "";
  const std::string attr = attribute_arg(a, 1);
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attr.empty() ? x : get_path(x, attr));
  }
  return Value(std::move(out));
}

Value f_int(const Value& v, const CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  const Value def = d ? *d : Value(0);
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double x = v.as_double();
    if (!std::isfinite(x) || std::fabs(x) >= 9.2e18) return def;
    return Value(static_cast<int64_t>(x));
  }
  if (v.is_string()) {
    const std::string s = py_strip(v.str(), std::nullopt, true, true);
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0)
      return Value(static_cast<int64_t>(i));
    const double x = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(x) && std::fabs(x) < 9.2e18) {
      return Value(static_cast<int64_t>(x));
    }
  }
  return def;
}

Value f_float(const Value& v, const CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  const Value def = d ? *d : Value(0.0);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    const std::string s = py_strip(v.str(), std::nullopt, true, true);
    char* end = nullptr;
    const double x = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(x);
  }
  return def;
}

Value f_trim(const Value& v, const CallArgs& a) {
  const Value* chars = arg(a, 0, "chars");
  std::optional<std::string> c;
  if (chars && !chars->is_none()) c = to_str(*chars);
  return Value(py_strip(to_str(v), c, true, true));
}

Value f_replace(const Value& v, const CallArgs& a) {
  const Value* o = arg(a, 0, "old");
  const Value* n = arg(a, 1, "new");
  if (!o || !n) throw TemplateError("replace filter needs old and new");
  const Value* c = arg(a, 2, "count");
  const int64_t count = c && !c->is_none() ? c->as_int() : -1;
  return Value(py_replace(to_str(v), to_str(*o), to_str(*n), count));
}

Value f_reverse(const Value& v, const CallArgs&) {
  if (v.is_string()) return get_slice(v, std::nullopt, std::nullopt, -1);
  Array items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::array(std::move(items));
}

// Jinja2 compares strings case-insensitively in sort/unique/min/max unless asked not to.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

Value f_sort(const Value& v, const CallArgs& a) {
  const bool rev = arg_bool(a, 0, "reverse", false);
  const bool cs = arg_bool(a, 1, "case_sensitive", false);
  const std::string attr = attribute_arg(a, 2);
  Array items = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& x : items)
    keyed.emplace_back(sort_key(attr.empty() ? x : get_path(x, attr), cs), x);
  std::stable_sort(keyed.begin(), keyed.end(), [rev](const auto& p, const auto& q) {
    return rev ? compare(q.first, p.first) < 0 : compare(p.first, q.first) < 0;
  });
  Array out;
  for (auto& p : keyed) out.push_back(std::move(p.second));
  return Value::array(std::move(out));
}

Value f_unique(const Value& v, const CallArgs& a) {
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  const std::string attr = attribute_arg(a, 1);
  Array out, seen;
  for (const Value& x : iterate(v)) {
    const Value k = sort_key(attr.empty() ? x : get_path(x, attr), cs);
    bool dup = false;
    for (const Value& s : seen) dup = dup || equals(s, k);
    if (!dup) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return Value::array(std::move(out));
}

Value min_max(const Value& v, const CallArgs& a, bool want_max) {
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  const std::string attr = attribute_arg(a, 1);
  const Array items = iterate(v);
  if (items.empty()) return Value::undefined("no items in the sequence");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value ki = sort_key(attr.empty() ? items[i] : get_path(items[i], attr), cs);
    const Value kb = sort_key(attr.empty() ? items[best] : get_path(items[best], attr), cs);
    const int c = compare(ki, kb);
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}
Value f_max(const Value& v, const CallArgs& a) { return min_max(v, a, true); }
Value f_min(const Value& v, const CallArgs& a) { return min_max(v, a, false); }

Value f_sum(const Value& v, const CallArgs& a) {
  const std::string attr = attribute_arg(a, 0);
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value(0);
  for (const Value& x : iterate(v))
    total = binary_op("+", total, attr.empty() ? x : get_path(x, attr));
  return total;
}

Value f_round(const Value& v, const CallArgs& a) {
  const Value* p = arg(a, 0, "precision");
  const Value* m = arg(a, 1, "method");
  const int64_t prec = p ? p->as_int() : 0;
  const std::string method = m ? to_str(*m) : "common";
  if (!v.is_number()) throw TemplateError("round filter needs a number");
  const double scale = std::pow(10.0, static_cast<double>(prec));
  const double x = v.as_double() * scale;
  double r;
  if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else if (method == "common") {
    r = std::nearbyint(x);  // Python's round(): half to even
  } else {
    throw TemplateError("round method must be common, ceil or floor");
  }
  return Value(r / scale);
}

Value f_indent(const Value& v, const CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  std::string ind;
  if (w && w->is_string()) {
    ind = w->str();
  } else {
    const int64_t n = w ? w->as_int() : 4;
    if (n < 0 || n > 4096) throw TemplateError("indent width out of range");
    ind.assign(static_cast<size_t>(n), ' ');
  }
  const bool first = arg_bool(a, 1, "first", false);
  const bool blank = arg_bool(a, 2, "blank", false);
  const std::string s = to_str(v) + "\n";
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(cur);
      cur.clear();
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      cur += s[i];
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += ind;
    }
    out += lines[i];
  }
  if (first) out = ind + out;
  return Value(std::move(out));
}

Value f_tojson(const Value& v, const CallArgs& a) {
  const Value* ind = arg(a, 1, "indent");
  const Value* sort = arg(a, 3, "sort_keys");
  const Value* sep = arg(a, 2, "separators");
  if (sep && !sep->is_none()) throw TemplateError("tojson: separators are not supported");
  int indent = -1;
  if (ind && !ind->is_none()) {
    if (!ind->is_int() || ind->as_int() < 0 || ind->as_int() > 64) {
      throw TemplateError("tojson: indent must be an integer from 0 to 64");
    }
    indent = static_cast<int>(ind->as_int());
  }
  return Value(to_json(v, indent, sort && truthy(*sort)));
}

Value f_wordcount(const Value& v, const CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : to_str(v)) {
    const bool w = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || static_cast<unsigned char>(c) >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

const Value* named(const CallArgs& a, std::string_view name) {
  for (const auto& [k, v] : a.named) {
    if (k == name) return &v;
  }
  return nullptr;
}

CallArgs tail(const CallArgs& a, size_t from) {
  CallArgs t;
  for (size_t i = from; i < a.positional.size(); ++i) t.positional.push_back(a.positional[i]);
  t.named = a.named;
  return t;
}

Value f_map(const Value& v, const CallArgs& a) {
  Array out;
  const Value* attr = named(a, "attribute");
  if (attr) {
    const Value* def = named(a, "default");
    for (const Value& x : iterate(v)) {
      Value r = get_path(x, to_str(*attr));
      out.push_back(r.is_undefined() && def ? *def : r);
    }
    return Value::array(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string()) {
    throw TemplateError("map needs a filter name or attribute=");
  }
  const std::string name = a.positional[0].str();
  if (!is_filter(name)) throw TemplateError("no filter named '" + excerpt_utf8(name, 40) + "'");
  const CallArgs rest = tail(a, 1);
  for (const Value& x : iterate(v)) out.push_back(apply_filter(name, x, rest));
  return Value::array(std::move(out));
}

Value select_impl(const Value& v, const CallArgs& a, bool by_attr, bool keep) {
  size_t i = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty()) throw TemplateError("selectattr needs an attribute name");
    attr = to_str(a.positional[0]);
    i = 1;
  }
  std::string test;
  if (i < a.positional.size()) test = to_str(a.positional[i]);
  if (!test.empty() && !is_test(test))
    throw TemplateError("no test named '" + excerpt_utf8(test, 40) + "'");
  const CallArgs rest = tail(a, i + 1);
  Array out;
  for (const Value& x : iterate(v)) {
    const Value probe = by_attr ? get_path(x, attr) : x;
    const bool r = test.empty() ? truthy(probe) : apply_test(test, probe, rest);
    if (r == keep) out.push_back(x);
  }
  return Value::array(std::move(out));
}
Value f_select(const Value& v, const CallArgs& a) { return select_impl(v, a, false, true); }
Value f_reject(const Value& v, const CallArgs& a) { return select_impl(v, a, false, false); }
Value f_selectattr(const Value& v, const CallArgs& a) { return select_impl(v, a, true, true); }
Value f_rejectattr(const Value& v, const CallArgs& a) { return select_impl(v, a, true, false); }

Value f_dictsort(const Value& v, const CallArgs& a) {
  if (!v.is_object()) throw TemplateError("dictsort needs a dict");
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* by = arg(a, 1, "by");
  const bool by_value = by && to_str(*by) == "value";
  const bool rev = arg_bool(a, 2, "reverse", false);
  Array pairs;
  for (const auto& [k, x] : v.obj().items) pairs.push_back(Value::array({Value(k), x}, true));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& p, const Value& q) {
    const size_t i = by_value ? 1 : 0;
    const int c = compare(sort_key(p.arr()[i], cs), sort_key(q.arr()[i], cs));
    return rev ? c > 0 : c < 0;
  });
  return Value::array(std::move(pairs));
}

struct Entry {
  std::string_view name;
  FilterFn fn;
};

constexpr Entry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_escape},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

FilterFn find_filter(std::string_view name) {
  for (const Entry& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace

bool is_filter(std::string_view name) { return find_filter(name) != nullptr; }

Value apply_filter(std::string_view name, const Value& v, const CallArgs& args) {
  const FilterFn f = find_filter(name);
  if (!f) throw TemplateError("no filter named '" + excerpt_utf8(name, 40) + "'");
  // Jinja2's filters raise on Undefined except those that look at it (default, length, ...),
  // which treat it as empty; the value functions above do the same through to_str/iterate.
  return f(v, args);
}

}  // namespace lift::tmpl
