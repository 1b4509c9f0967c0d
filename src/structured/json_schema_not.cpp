// "not": the values of the rest of the schema that the negated schema rejects. A grammar cannot
// be complemented in general (objects and arrays nest without bound), but the languages of
// scalar values are regular, and so the compiler splits by JSON type:
//   - a type the negated schema cannot have keeps all of the rest's values of that type;
//   - a scalar type (null, boolean, number, string) keeps the rest's values minus the negated
//     schema's, a difference of two regular languages;
//   - objects and arrays only in the forms that are a restriction of the same schema
//     (a property that must be absent) or when the negated schema asks nothing of them.
// An enum in the rest is filtered value by value instead, which is exact for any value.
#include <set>
#include <string_view>
#include <utility>

#include "structured/json_schema_compiler.h"

namespace lift::structured {

namespace {

// The schema's constraint keywords only (its annotations would hide the single-keyword forms).
Json constraints_of(const Json& s) {
  if (!s.is_object()) return s;
  Json out = Json::object();
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (is_constraint_keyword(it.key())) out[it.key()] = it.value();
  }
  return out;
}

// The types the values of `s` can have, narrowed by enum/const where it has them.
unsigned value_types(const Json& s, std::string_view pointer) {
  unsigned t = schema_types(s, pointer);
  if (!s.is_object() || (!s.contains("enum") && !s.contains("const"))) return t;
  unsigned of_values = 0;
  if (s.contains("const")) of_values |= value_type(s.at("const"));
  if (s.contains("enum") && s.at("enum").is_array()) {
    for (const Json& v : s.at("enum")) of_values |= value_type(v);
  }
  return t & of_values;
}

constexpr unsigned kFractional = kNumber & ~kInteger;

// The keywords that constrain values of one type (type, enum, const and the combinators
// constrain all); the others are vacuous for it.
bool applies_to(std::string_view k, unsigned bit) {
  static const std::set<std::string_view> kString = {
      "minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType"};
  static const std::set<std::string_view> kNumeric = {"minimum", "maximum", "exclusiveMinimum",
                                                      "exclusiveMaximum", "multipleOf"};
  static const std::set<std::string_view> kObjectKeys = {
      "properties",        "required",        "additionalProperties", "patternProperties",
      "propertyNames",     "minProperties",   "maxProperties",        "dependencies",
      "dependentRequired", "dependentSchemas"};
  static const std::set<std::string_view> kArrayKeys = {
      "items",       "prefixItems", "additionalItems", "minItems",   "maxItems",
      "uniqueItems", "contains",    "minContains",     "maxContains"};
  if (kString.count(k)) return bit == lift::structured::kString;
  if (kNumeric.count(k)) return bit == kInteger;
  if (kObjectKeys.count(k)) return bit == kObject;
  if (kArrayKeys.count(k)) return bit == kArray;
  return true;
}

// {"required": [names]} and perhaps a type: of objects, those with every name.
bool is_required_only(const Json& n) {
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (it.key() != "type" && applies_to(it.key(), kObject) && it.key() != "required") {
      return false;
    }
  }
  return n.contains("required") && n.at("required").is_array() && !n.at("required").empty();
}

enum class Negated { all, exact, unsupported };

// What the negated schema `n` says of the values of one type: it accepts all of them (only
// vacuous keywords), or its grammar for them is exactly its language (so the complement is exact
// too; a grammar narrower than the schema, as number spellings and formats are, is safe only
// unnegated), or neither.
Negated negated_for(const Json& n, unsigned bit) {
  bool any = false;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string& k = it.key();
    if (k == "type" || !applies_to(k, bit)) continue;
    any = true;
    if (bit == kObject || bit == kArray) return Negated::unsupported;  // grammars with rules
    // Number literals are spelled as the schema writes them, while 1 and 1.0 are one value.
    if ((k == "enum" || k == "const") && bit != kInteger) continue;
    if (bit == lift::structured::kString &&
        (k == "pattern" || k == "minLength" || k == "maxLength")) {
      continue;
    }
    return Negated::unsupported;
  }
  return any ? Negated::exact : Negated::all;
}

// `s` narrowed to the type named `name`.
Json with_type(const Json& s, const char* name) {
  Json out = s.is_object() ? s : Json::object();
  out["type"] = name;
  return out;
}

}  // namespace

ExprId SchemaCompiler::negation(const Json& s, const std::string& pointer) {
  const std::string np = pointer_join(pointer, "not");
  const Json n = constraints_of(flatten_schema(root_, s.at("not"), np));
  Json rest = without(s, {"not"});
  if (!has_constraints(n)) return b_.nothing();
  if (n.is_boolean()) return body(rest, pointer);  // not false
  if (n.size() == 1 && n.contains("not")) {
    return body(merge_schemas(root_, rest, n.at("not"), np), pointer);
  }
  // An enum is a finite list: keep the values the negated schema rejects.
  if (rest.contains("enum") || rest.contains("const")) {
    Json kept = Json::array();
    Json values = rest.contains("enum") ? rest.at("enum") : Json::array({rest.at("const")});
    if (!values.is_array()) schema_error(pointer_join(pointer, "enum"), "must be an array");
    for (const Json& v : values) {
      if (!probe(n, v, np)) kept.push_back(v);
    }
    if (rest.contains("const") && rest.contains("enum")) {
      const Json c = rest.at("const");
      Json both = Json::array();
      for (const Json& v : kept) {
        if (v == c) both.push_back(v);
      }
      kept = both;
    }
    rest.erase("const");
    rest["enum"] = kept;
    return body(rest, pointer);
  }

  const unsigned have = schema_types(rest, pointer);
  const unsigned hit = value_types(n, np);
  std::vector<ExprId> alts;
  auto one_type = [&](unsigned bit, const char* name) {
    if (!(have & bit)) return;
    if (!(hit & bit)) {
      alts.push_back(body(with_type(rest, name), pointer));
      return;
    }
    if (bit == kObject && is_required_only(n)) {
      // Some listed property absent: one case per name (they may overlap, as anyOf branches
      // may).
      std::vector<ExprId> cases;
      for (const Json& key : n.at("required")) {
        if (!key.is_string()) schema_error(pointer_join(np, "required"), "must list strings");
        Json c = with_type(rest, name);
        Json props = c.value("properties", Json::object());
        props[key.get<std::string>()] = false;
        c["properties"] = std::move(props);
        cases.push_back(value(c, pointer));
      }
      alts.push_back(b_.alt(cases));
      return;
    }
    switch (negated_for(n, bit)) {
      case Negated::all:
        return;
      case Negated::exact:
        alts.push_back(
            b_.difference(body(with_type(rest, name), pointer), body(with_type(n, name), np)));
        return;
      case Negated::unsupported:
        schema_error(np, std::string("keyword \"not\" is not supported for ") + name +
                             " values beyond " +
                             (bit == kObject || bit == kArray ? "{\"required\": [...]}"
                              : bit == kString                ? "enum/const, pattern and lengths"
                                                              : "enum/const") +
                             " and {\"type\": ...}");
    }
  };
  one_type(kNull, "null");
  one_type(kBoolean, "boolean");
  one_type(kString, "string");
  if (have & kInteger) {
    if ((have & kFractional) && (hit & kInteger) && !(hit & kFractional)) {
      // Numbers that are not integers: 1.0 is an integer too, which no spelling rule tells.
      schema_error(np, "\"not\": {\"type\": \"integer\"} of numbers is not supported");
    }
    one_type(kInteger, (have & kFractional) ? "number" : "integer");
  }
  one_type(kObject, "object");
  one_type(kArray, "array");
  return b_.alt(alts);
}

}  // namespace lift::structured
