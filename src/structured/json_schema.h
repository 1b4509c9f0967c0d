// JSON Schema (draft 2020-12 and the older drafts real schemas use: 4, 6, 7, 2019-09) compiled
// to a grammar of the JSON texts that validate. Exactness first: every keyword that constrains
// instances is either enforced exactly or refused with GrammarError (never silently ignored:
// that is how invalid JSON gets through). Annotations (title, description, default, ...) and
// keywords outside the JSON Schema vocabulary are ignored, as validators ignore them. Where the
// grammar must be narrower than the schema (properties in the order the schema writes them),
// output stays valid; only some valid texts cannot be produced.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "structured/grammar.h"

namespace lift::structured {

struct JsonSchemaOptions {
  // Longest run of JSON whitespace (space, \t, \n, \r) allowed wherever JSON allows whitespace
  // (0: compact JSON only). Bounded so a model cannot loop on whitespace forever.
  uint32_t max_whitespace = 20;
  // OpenAI's strict mode: additionalProperties defaults to false.
  bool strict = false;
};

// Adds the rules for `schema` to `b` and returns the rule of one JSON value that validates.
// Throws GrammarError naming the keyword and its JSON pointer ("/properties/a/pattern").
RuleId compile_json_schema(const nlohmann::json& schema, GrammarBuilder& b,
                           const JsonSchemaOptions& opt = {});

// The whole grammar: one JSON value valid under `schema`, nothing before or after it.
Grammar json_schema_grammar(const nlohmann::json& schema, const JsonSchemaOptions& opt = {},
                            const GrammarLimits& limits = {});

// The same for a schema parsed as ordered_json: nlohmann::json sorts object keys, so only an
// ordered_json keeps the property order the schema writes (and the grammar enforces).
RuleId compile_json_schema(const nlohmann::ordered_json& schema, GrammarBuilder& b,
                           const JsonSchemaOptions& opt = {});
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opt = {},
                            const GrammarLimits& limits = {});

}  // namespace lift::structured
