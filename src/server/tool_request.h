// A chat request's tools: `tools`, `tool_choice` and `parallel_tool_calls` read and checked,
// and, for tool_choice "required" or a named function, the grammar that makes the model's
// reply a call in its own syntax (tool_calls.h) whose arguments fit the tool's parameters
// schema, so the call always parses.
//
//   none      the template renders no tools; the reply is content
//   auto      the model may call or answer; what it writes is parsed, not constrained
//   required  one call (several with parallel_tool_calls, the default) of any of the tools
//   {"type": "function", "function": {"name": N}}  one call (or several) of N
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/tool_calls.h"
#include "structured/grammar.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"

namespace lift {

struct ApiContext;
struct ApiRequest;

enum class ToolChoice { none, automatic, required, named };

struct ToolRequest {
  nlohmann::ordered_json tools;  // the request's tools, keys in the client's order (or null)
  std::vector<std::string> names;
  ToolChoice choice = ToolChoice::automatic;
  std::string named;  // choice == named
  bool parallel = true;

  bool constrained() const { return choice == ToolChoice::required || choice == ToolChoice::named; }
  // The functions a reply may call: the named one, or every tool.
  std::vector<std::string> callable() const;
};

// body: the request; tools: its "tools" with keys in order (null when absent). Throws
// ApiError 400 naming the field: a tool that is not {"type": "function", "function": {"name",
// "description"?, "parameters"?, "strict"?}}, a name that is not 1-64 of [A-Za-z0-9_-] or is
// given twice, a tool_choice naming no tool, required/named without tools.
ToolRequest parse_tool_request(const nlohmann::json& body, const nlohmann::ordered_json& tools);

// What a reply must be under required / named, in format f: the format's call syntax around
// {"name": N, "arguments" ("parameters" for llama3_json): <N's parameters schema>}; a tool
// without parameters takes {}. Throws structured::GrammarError for a schema that cannot be
// compiled, its message naming the tool.
structured::Grammar tool_call_grammar(const ToolRequest& r, ToolCallFormat f,
                                      const structured::JsonSchemaOptions& opt = {});

// The request's tool setup: what the output is parsed for (r.tool_calls) and, under
// required / named, the constraint (r.params.constraint), compiled against ctx's vocabulary
// and cached by the tools, choice and format. Throws ApiError 400 ("tool_choice" when another
// output constraint is given too or none can be compiled here, "tools" for a bad schema).
void apply_tool_request(const ToolRequest& tools, const ApiContext& ctx, ApiRequest& r);

}  // namespace lift
