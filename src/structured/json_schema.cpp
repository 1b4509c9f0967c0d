#include "structured/json_schema.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "structured/json_schema_compiler.h"
#include "structured/json_schema_format.h"
#include "structured/json_schema_number.h"
#include "structured/json_schema_refs.h"
#include "structured/regex.h"

namespace lift::structured {

namespace {

// Keywords of the JSON Schema vocabularies that constrain instances. Everything else in a
// schema object (title, description, default, $comment, x-*, "_format", ...) is an annotation
// or outside the vocabulary and is ignored, as validators do.
const std::set<std::string, std::less<>> kConstraintKeywords = {"type",
                                                                "enum",
                                                                "const",
                                                                "properties",
                                                                "required",
                                                                "additionalProperties",
                                                                "patternProperties",
                                                                "propertyNames",
                                                                "minProperties",
                                                                "maxProperties",
                                                                "items",
                                                                "prefixItems",
                                                                "additionalItems",
                                                                "minItems",
                                                                "maxItems",
                                                                "uniqueItems",
                                                                "contains",
                                                                "minContains",
                                                                "maxContains",
                                                                "minLength",
                                                                "maxLength",
                                                                "pattern",
                                                                "format",
                                                                "minimum",
                                                                "maximum",
                                                                "exclusiveMinimum",
                                                                "exclusiveMaximum",
                                                                "multipleOf",
                                                                "anyOf",
                                                                "oneOf",
                                                                "allOf",
                                                                "not",
                                                                "$ref",
                                                                "if",
                                                                "then",
                                                                "else",
                                                                "dependencies",
                                                                "dependentRequired",
                                                                "dependentSchemas",
                                                                "unevaluatedProperties",
                                                                "unevaluatedItems",
                                                                "$dynamicRef",
                                                                "$recursiveRef",
                                                                "divisibleBy",
                                                                "disallow",
                                                                "extends"};

// Constraint keywords no part of the compiler enforces.
const std::set<std::string, std::less<>> kRefused = {
    "contains",         "minContains", "maxContains",   "unevaluatedProperties",
    "unevaluatedItems", "$dynamicRef", "$recursiveRef", "divisibleBy",
    "disallow",         "extends"};

std::vector<char32_t> utf8_code_points(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (int k = 1; k < n && i + static_cast<size_t>(k) < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3Fu);
    }
    out.push_back(cp);
    i += static_cast<size_t>(n);
  }
  return out;
}

uint32_t non_negative(const Json& s, const char* key, const std::string& pointer) {
  const double d = schema_count(s, key, pointer);
  return d >= 4e9 ? kUnbounded - 1 : static_cast<uint32_t>(d);
}

// Longest string / array repetition spelled out: above it the grammar is narrower than the
// schema (a longer instance cannot be produced) rather than a huge automaton.
constexpr uint32_t kMaxSpelledRepeat = 1000;

}  // namespace

bool has_constraints(const Json& s, std::initializer_list<std::string_view> except) {
  if (!s.is_object()) return !s.is_boolean() || !s.get<bool>();
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (!is_constraint_keyword(it.key())) continue;
    if (std::find(except.begin(), except.end(), it.key()) == except.end()) return true;
  }
  return false;
}

Json without(const Json& s, std::initializer_list<std::string_view> keys) {
  Json out = Json::object();
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) out[it.key()] = it.value();
  }
  return out;
}

bool is_constraint_keyword(std::string_view key) { return kConstraintKeywords.count(key) != 0; }

double schema_count(const Json& s, const char* key, const std::string& pointer) {
  const Json& v = s.at(key);
  // Compared as doubles, never cast first: 1e20 does not fit an integer type.
  const double d = v.is_number() ? v.get<double>() : -1;
  if (!(d >= 0) || !std::isfinite(d) || d != std::floor(d)) {
    schema_error(pointer_join(pointer, key), "must be a non-negative integer");
  }
  return d;
}

[[noreturn]] void schema_error(std::string_view pointer, std::string_view what) {
  throw GrammarError("JSON Schema: " + std::string(pointer.empty() ? "(root)" : pointer) + ": " +
                     std::string(what));
}

std::string pointer_join(std::string_view pointer, std::string_view token) {
  std::string out(pointer);
  out += '/';
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

unsigned value_type(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return kNull;
    case Json::value_t::boolean:
      return kBoolean;
    case Json::value_t::object:
      return kObject;
    case Json::value_t::array:
      return kArray;
    case Json::value_t::string:
      return kString;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return kInteger;
    default:
      return kNumber & ~kInteger;  // written with a fraction or exponent
  }
}

unsigned schema_types(const Json& s, std::string_view pointer) {
  if (s.is_boolean()) return s.get<bool>() ? unsigned{kAllTypes} : 0u;
  auto it = s.find("type");
  if (it == s.end()) return kAllTypes;
  auto one = [&](const Json& t) -> unsigned {
    if (!t.is_string()) schema_error(pointer_join(pointer, "type"), "must be a type name");
    const std::string& n = t.get_ref<const std::string&>();
    if (n == "null") return kNull;
    if (n == "boolean") return kBoolean;
    if (n == "object") return kObject;
    if (n == "array") return kArray;
    if (n == "string") return kString;
    if (n == "integer") return kInteger;
    if (n == "number") return kNumber;
    schema_error(pointer_join(pointer, "type"), "unknown type \"" + n + "\"");
  };
  if (!it->is_array()) return one(*it);
  unsigned bits = 0;
  for (const Json& t : *it) bits |= one(t);
  return bits;
}

SchemaCompiler::SchemaCompiler(const Json& root, GrammarBuilder& b, const JsonSchemaOptions& opt)
    : root_(root), b_(b), opt_(opt) {
  ByteSet space;
  for (char c : {' ', '\t', '\n', '\r'}) space.set(static_cast<uint8_t>(c));
  ws_ = b_.repeat(b_.byte_set(space), 0, opt_.max_whitespace);
}

ExprId SchemaCompiler::string_char() {
  if (string_char_ < 0) string_char_ = code_point(b_, CodePointSet::all(), true);
  return string_char_;
}

ExprId SchemaCompiler::string_literal_contents(std::string_view text) {
  std::vector<ExprId> parts;
  for (char32_t c : utf8_code_points(text)) {
    parts.push_back(code_point(b_, CodePointSet::range(c, c), true));
  }
  return b_.seq(parts);
}

ExprId SchemaCompiler::literal_value(const Json& v) {
  const ExprId comma = b_.seq({ws_, b_.literal(","), ws_});
  switch (v.type()) {
    case Json::value_t::string:
      return b_.seq({b_.literal("\""), string_literal_contents(v.get_ref<const std::string&>()),
                     b_.literal("\"")});
    case Json::value_t::array: {
      if (v.empty()) return b_.seq({b_.literal("["), ws_, b_.literal("]")});
      std::vector<ExprId> parts{b_.literal("["), ws_};
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) parts.push_back(comma);
        parts.push_back(literal_value(v[i]));
      }
      parts.push_back(ws_);
      parts.push_back(b_.literal("]"));
      return b_.seq(parts);
    }
    case Json::value_t::object: {
      if (v.empty()) return b_.seq({b_.literal("{"), ws_, b_.literal("}")});
      std::vector<ExprId> parts{b_.literal("{"), ws_};
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) parts.push_back(comma);
        first = false;
        parts.push_back(literal_value(Json(it.key())));
        parts.push_back(b_.seq({ws_, b_.literal(":"), ws_}));
        parts.push_back(literal_value(it.value()));
      }
      parts.push_back(ws_);
      parts.push_back(b_.literal("}"));
      return b_.seq(parts);
    }
    default:
      return b_.literal(v.dump());
  }
}

ExprId SchemaCompiler::any_value() {
  if (any_rule_ >= 0) return b_.call(any_rule_);
  any_rule_ = b_.declare("json-value");
  const ExprId any = b_.call(any_rule_);
  const ExprId comma = b_.seq({ws_, b_.literal(","), ws_});
  const ExprId str = b_.seq({b_.literal("\""), b_.star(string_char()), b_.literal("\"")});
  const ExprId member = b_.seq({str, ws_, b_.literal(":"), ws_, any});
  const ExprId object =
      b_.seq({b_.literal("{"), ws_,
              b_.alt({b_.literal("}"),
                      b_.seq({member, b_.star(b_.seq({comma, member})), ws_, b_.literal("}")})})});
  const ExprId array =
      b_.seq({b_.literal("["), ws_,
              b_.alt({b_.literal("]"),
                      b_.seq({any, b_.star(b_.seq({comma, any})), ws_, b_.literal("]")})})});
  b_.define(any_rule_, b_.alt({b_.literal("null"), b_.literal("true"), b_.literal("false"),
                               json_number(b_, {}, false), str, array, object}));
  return any;
}

bool SchemaCompiler::probe(const Json& schema, const Json& v, const std::string& pointer) {
  if (probe_depth_ > 8) schema_error(pointer, "enum/const checks nested too deeply");
  GrammarBuilder pb;
  JsonSchemaOptions o = opt_;
  o.max_whitespace = 0;
  SchemaCompiler pc(root_, pb, o);
  pc.probe_depth_ = probe_depth_ + 1;
  pb.set_start(pc.rule(schema, pointer));
  return pb.build().matches(v.dump());
}

RuleId SchemaCompiler::rule(const Json& schema, const std::string& pointer) {
  // A bare $ref (annotations beside it at most) is the rule of its target: no extra rule.
  const Json* s = &schema;
  std::string ptr = pointer;
  for (int hops = 0; s->is_object() && s->contains("$ref") && !has_constraints(*s, {"$ref"});
       ++hops) {
    const Json& ref = s->at("$ref");
    if (!ref.is_string()) schema_error(pointer_join(ptr, "$ref"), "must be a string");
    if (hops > 64) schema_error(ptr, "$ref chain loops without a value in between");
    ResolvedRef r = resolve_ref(root_, ref.get_ref<const std::string&>(), ptr);
    s = r.schema;
    ptr = r.pointer;
  }
  std::string key = s->dump();
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const RuleId r = b_.declare(ptr.empty() ? "root" : ptr);
  memo_.emplace(std::move(key), r);
  const ExprId e = body(*s, ptr);
  if (e == b_.nothing()) empty_rules_.insert(r);
  b_.define(r, e);
  return r;
}

ExprId SchemaCompiler::body(const Json& s, const std::string& pointer) {
  if (s.is_boolean()) return s.get<bool>() ? any_value() : b_.nothing();
  if (!s.is_object()) schema_error(pointer, "a schema must be an object or a boolean");
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (kRefused.count(it.key())) {
      schema_error(pointer_join(pointer, it.key()),
                   "keyword \"" + it.key() + "\" is not supported");
    }
  }
  if (s.contains("if") && (s.contains("then") || s.contains("else"))) {
    schema_error(pointer_join(pointer, "if"), "keyword \"if\" is not supported");
  }
  if (s.contains("$ref") || s.contains("allOf"))
    return body(flatten_schema(root_, s, pointer), pointer);
  if (const std::vector<Json> cases = split_dependency(root_, s, pointer); !cases.empty()) {
    if (cases.size() == 1) return body(cases[0], pointer);
    return b_.alt({value(cases[0], pointer), value(cases[1], pointer)});
  }
  if (s.contains("not")) return negation(s, pointer);
  if (s.contains("oneOf")) return one_of(s, pointer);
  if (s.contains("anyOf")) {
    const Json& branches = s.at("anyOf");
    const std::string ap = pointer_join(pointer, "anyOf");
    if (!branches.is_array() || branches.empty()) schema_error(ap, "must be a non-empty array");
    const Json base = without(s, {"anyOf"});
    const bool merge = has_constraints(base);
    std::vector<ExprId> alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bp = pointer_join(ap, std::to_string(i));
      alts.push_back(merge ? value(merge_schemas(root_, base, branches[i], bp), bp)
                           : value(branches[i], bp));
    }
    return b_.alt(alts);
  }
  if (s.contains("enum") || s.contains("const")) return enum_expr(s, pointer);
  return typed_body(s, pointer);
}

ExprId SchemaCompiler::typed_body(const Json& s, const std::string& pointer) {
  const unsigned types = schema_types(s, pointer);
  std::vector<ExprId> alts;
  if (types & kNull) alts.push_back(b_.literal("null"));
  if (types & kBoolean) alts.push_back(b_.alt({b_.literal("true"), b_.literal("false")}));
  if (types & kNumber & ~kInteger) {
    alts.push_back(number_expr(s, pointer, false));
  } else if (types & kInteger) {
    alts.push_back(number_expr(s, pointer, true));
  }
  if (types & kString) {
    alts.push_back(b_.seq({b_.literal("\""), string_contents(s, pointer), b_.literal("\"")}));
  }
  if (types & kArray) alts.push_back(array_expr(s, pointer));
  if (types & kObject) alts.push_back(object_expr(s, pointer));
  return b_.alt(alts);
}

ExprId SchemaCompiler::enum_expr(const Json& s, const std::string& pointer) {
  std::vector<Json> values;
  if (s.contains("enum")) {
    const Json& e = s.at("enum");
    if (!e.is_array()) schema_error(pointer_join(pointer, "enum"), "must be an array");
    values.assign(e.begin(), e.end());
  }
  if (s.contains("const")) {
    const Json& c = s.at("const");
    if (s.contains("enum")) {
      const bool in = std::find(values.begin(), values.end(), c) != values.end();
      values.clear();
      if (in) values.push_back(c);
    } else {
      values.push_back(c);
    }
  }
  const Json rest = without(s, {"enum", "const"});
  const unsigned types = schema_types(s, pointer);
  const bool check = has_constraints(rest, {"type"});
  std::vector<ExprId> alts;
  for (const Json& v : values) {
    if (!(value_type(v) & types)) continue;
    if (check && !probe(rest, v, pointer)) continue;
    alts.push_back(literal_value(v));
  }
  return b_.alt(alts);
}

ExprId SchemaCompiler::string_contents(const Json& s, const std::string& pointer) {
  if (s.contains("enum") || s.contains("const")) {
    // Property names under propertyNames: {"enum": [...]}; the string values that pass.
    std::vector<Json> values;
    if (s.contains("enum") && s.at("enum").is_array())
      values.assign(s["enum"].begin(), s["enum"].end());
    if (s.contains("const")) {
      if (!s.contains("enum") ||
          std::find(values.begin(), values.end(), s["const"]) != values.end()) {
        values = {s["const"]};
      } else {
        values.clear();
      }
    }
    const Json rest = without(s, {"enum", "const"});
    const bool check = has_constraints(rest, {"type"});
    std::vector<ExprId> alts;
    for (const Json& v : values) {
      if (!v.is_string() || (check && !probe(rest, v, pointer))) continue;
      alts.push_back(string_literal_contents(v.get_ref<const std::string&>()));
    }
    return b_.alt(alts);
  }
  std::vector<ExprId> parts;
  if (s.contains("minLength") || s.contains("maxLength")) {
    const uint32_t lo = s.contains("minLength") ? non_negative(s, "minLength", pointer) : 0;
    uint32_t hi = s.contains("maxLength") ? non_negative(s, "maxLength", pointer) : kUnbounded;
    if (hi != kUnbounded && hi > std::max(lo, kMaxSpelledRepeat))
      hi = std::max(lo, kMaxSpelledRepeat);
    if (lo > hi) return b_.nothing();
    if (lo > kMaxSpelledRepeat) schema_error(pointer_join(pointer, "minLength"), "is too large");
    if (lo > 0 || hi != kUnbounded) parts.push_back(b_.repeat(string_char(), lo, hi));
  }
  if (s.contains("pattern")) {
    const Json& p = s.at("pattern");
    if (!p.is_string()) schema_error(pointer_join(pointer, "pattern"), "must be a string");
    RegexOptions o;
    o.anchored = false;
    o.json_string = true;
    try {
      parts.push_back(compile_regex(p.get_ref<const std::string&>(), b_, o));
    } catch (const GrammarError& e) {
      schema_error(pointer_join(pointer, "pattern"), e.what());
    }
  }
  if (s.contains("format")) {
    const Json& f = s.at("format");
    if (!f.is_string()) schema_error(pointer_join(pointer, "format"), "must be a string");
    const std::optional<ExprId> fmt =
        json_string_format(b_, f.get_ref<const std::string&>(), pointer_join(pointer, "format"));
    if (fmt) parts.push_back(*fmt);
  }
  if (parts.empty()) return b_.star(string_char());
  ExprId out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out = b_.intersect(out, parts[i]);
  return out;
}

NumberBounds schema_number_bounds(const Json& s, const std::string& pointer) {
  NumberBounds bounds;
  auto number = [&](const char* key) {
    const Json& v = s.at(key);
    if (!v.is_number()) schema_error(pointer_join(pointer, key), "must be a number");
    return Decimal::from_json(v);
  };
  auto flag = [&](const char* key) {  // draft 4: a boolean beside minimum / maximum
    auto it = s.find(key);
    return it != s.end() && it->is_boolean() && it->get<bool>();
  };
  if (s.contains("minimum")) bounds.add_lo(number("minimum"), flag("exclusiveMinimum"));
  if (s.contains("maximum")) bounds.add_hi(number("maximum"), flag("exclusiveMaximum"));
  if (s.contains("exclusiveMinimum") && !s.at("exclusiveMinimum").is_boolean()) {
    bounds.add_lo(number("exclusiveMinimum"), true);
  }
  if (s.contains("exclusiveMaximum") && !s.at("exclusiveMaximum").is_boolean()) {
    bounds.add_hi(number("exclusiveMaximum"), true);
  }
  return bounds;
}

ExprId SchemaCompiler::number_expr(const Json& s, const std::string& pointer, bool integer) {
  const NumberBounds bounds = schema_number_bounds(s, pointer);
  if (!s.contains("multipleOf")) return json_number(b_, bounds, integer);
  const std::string mp = pointer_join(pointer, "multipleOf");
  const Json& m = s.at("multipleOf");
  if (!m.is_number() || m.get<double>() <= 0) schema_error(mp, "must be a positive number");
  std::string why;
  const auto e = json_multiple(b_, bounds, integer, Decimal::from_json(m), why);
  if (!e) schema_error(mp, "not supported: " + why);
  return *e;
}

RuleId compile_json_schema(const Json& schema, GrammarBuilder& b, const JsonSchemaOptions& opt) {
  SchemaCompiler c(schema, b, opt);
  return c.rule(schema, "");
}

RuleId compile_json_schema(const nlohmann::json& schema, GrammarBuilder& b,
                           const JsonSchemaOptions& opt) {
  return compile_json_schema(Json(schema), b, opt);
}

Grammar json_schema_grammar(const Json& schema, const JsonSchemaOptions& opt,
                            const GrammarLimits& limits) {
  GrammarBuilder b;
  b.set_start(compile_json_schema(schema, b, opt));
  return b.build(limits);
}

Grammar json_schema_grammar(const nlohmann::json& schema, const JsonSchemaOptions& opt,
                            const GrammarLimits& limits) {
  return json_schema_grammar(Json(schema), opt, limits);
}

}  // namespace lift::structured
