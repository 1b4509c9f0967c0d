// The JSON Schema compiler's internals, shared by json_schema*.cpp: one SchemaCompiler per
// document turns each distinct sub-schema into one grammar rule (memoized by its canonical
// text, so repeated and recursive sub-schemas share rules), dispatching per JSON type.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace lift::structured {

using Json = nlohmann::ordered_json;

// Whether `key` is a JSON Schema keyword that constrains instances (else: ignored).
bool is_constraint_keyword(std::string_view key);
// Whether `s` has a constraint keyword other than those in `except` (false for true and {}).
bool has_constraints(const Json& s, std::initializer_list<std::string_view> except = {});
// `s` (an object) without `keys`.
Json without(const Json& s, std::initializer_list<std::string_view> keys);
[[noreturn]] void schema_error(std::string_view pointer, std::string_view what);
// The value of a count keyword (minLength, maxItems, minProperties, ...): a non-negative whole
// number (2.0 counts; 1e20 too, callers cap it), else a schema error naming the keyword.
double schema_count(const Json& s, const char* key, const std::string& pointer);
std::string pointer_join(std::string_view pointer, std::string_view token);

// Merges the schemas of an allOf into one schema accepting exactly the instances both accept
// (GrammarError where that cannot be written as one schema). $refs at the top of either side
// are resolved against `root` first.
Json merge_schemas(const Json& root, const Json& a, const Json& b, std::string_view pointer);
// `s` with a top-level $ref and allOf folded in (a schema without either).
Json flatten_schema(const Json& root, const Json& s, std::string_view pointer, int depth = 0);

// dependencies / dependentRequired / dependentSchemas in `s` as cases without them: {} when
// there are none, one schema when a rule could be dropped or folded in, else two disjoint
// ones (the trigger property absent; present, with what the rule asks). The other rules stay
// in each case, for the next call (json_schema_dependencies.cpp).
std::vector<Json> split_dependency(const Json& root, const Json& s, const std::string& pointer);

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, GrammarBuilder& b, const JsonSchemaOptions& opt);

  // The rule of one JSON value valid under `schema` (found at `pointer`, for messages).
  RuleId rule(const Json& schema, const std::string& pointer);
  ExprId value(const Json& schema, const std::string& pointer) {
    const RuleId r = rule(schema, pointer);
    return empty_rules_.count(r) ? b_.nothing() : b_.call(r);
  }
  ExprId ws() const { return ws_; }
  ExprId any_value();
  GrammarBuilder& builder() { return b_; }
  const Json& root() const { return root_; }
  const JsonSchemaOptions& options() const { return opt_; }

  // One JSON string character (raw or escaped) and the contents of a string equal to `text`
  // in any spelling JSON allows.
  ExprId string_char();
  ExprId string_literal_contents(std::string_view text);
  // The contents of the strings valid under a string-only schema (minLength, maxLength,
  // pattern, format, enum/const of strings): used for strings and for property names.
  ExprId string_contents(const Json& s, const std::string& pointer);
  // A JSON value equal to `v` (whitespace as JSON allows, numbers as written).
  ExprId literal_value(const Json& v);
  // Whether `v` serialized compactly is in the language of `schema`, compiled on its own: how
  // enum values, property names and patterns are checked against the rest of a schema.
  bool probe(const Json& schema, const Json& v, const std::string& pointer);

  ExprId object_expr(const Json& s, const std::string& pointer);  // json_schema_object.cpp
  ExprId array_expr(const Json& s, const std::string& pointer);   // json_schema_array.cpp

 private:
  ExprId body(const Json& s, const std::string& pointer);
  ExprId typed_body(const Json& s, const std::string& pointer);
  ExprId one_of(const Json& s, const std::string& pointer);
  ExprId negation(const Json& s, const std::string& pointer);  // json_schema_not.cpp
  ExprId enum_expr(const Json& s, const std::string& pointer);
  ExprId number_expr(const Json& s, const std::string& pointer, bool integer);

  const Json& root_;
  GrammarBuilder& b_;
  JsonSchemaOptions opt_;
  ExprId ws_;
  ExprId string_char_ = -1;
  RuleId any_rule_ = -1;
  std::unordered_map<std::string, RuleId> memo_;
  std::unordered_set<RuleId> empty_rules_;  // rules of unsatisfiable schemas: never called
  int probe_depth_ = 0;
};

// The JSON types a schema admits, as a bit set; `integer` is a subset of `number`.
enum TypeBits : unsigned {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kNumber = 64 | 32,
  kAllTypes = 1 | 2 | 4 | 8 | 16 | 64 | 32,
};
unsigned schema_types(const Json& s, std::string_view pointer);
struct NumberBounds;
NumberBounds schema_number_bounds(const Json& s, const std::string& pointer);
unsigned value_type(const Json& v);

}  // namespace lift::structured
