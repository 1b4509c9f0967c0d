// The structured-output fields of a completion or chat request, in the dialects clients send
// them, read into one ConstraintSpec:
//   OpenAI     response_format: {"type": "text" | "json_object" | "json_schema",
//                                "json_schema": {"name", "schema", "strict", "description"}}
//   vLLM       structured_outputs: {"json" | "regex" | "choice" | "grammar" | "json_object",
//                                   "disable_any_whitespace", "disable_additional_properties"}
//              and the older guided_json, guided_regex, guided_choice, guided_grammar
//   llama.cpp  grammar (GBNF), json_schema; response_format {"type": "json_object", "schema"}
// A request may ask for one constraint only: two of these fields (or two kinds inside
// structured_outputs) are a 400 naming both. Options lift cannot honour exactly
// (whitespace_pattern, structural_tag) are refused, not ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "structured/constraint.h"

namespace lift {

struct ConstraintRequest {
  structured::ConstraintSpec spec;
  std::string param;  // the field it came from, for error messages ("response_format")
};

// b: the request body; body: its text, reparsed with key order kept when a schema is present
// (properties are generated in the order the schema writes them). Throws ApiError 400.
std::optional<ConstraintRequest> parse_constraint_fields(const nlohmann::json& b,
                                                         std::string_view body);

// Compiles c, turning a structured::GrammarError into ApiError 400 on c.param whose message
// says which field failed and why.
std::shared_ptr<const structured::CompiledGrammar> compile_constraint(
    structured::ConstraintCompiler& compiler, const ConstraintRequest& c);

}  // namespace lift
