#include "server/constraint_request.h"

#include <vector>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace lift {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using structured::ConstraintKind;
using structured::ConstraintSpec;

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError(400, msg, param);
}

bool present(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

const std::string& string_at(const json& v, const std::string& where) {
  if (!v.is_string()) bad(where, "'" + where + "' must be a string, got " + describe_json(v));
  return v.get_ref<const std::string&>();
}

bool bool_at(const json& v, const std::string& where) {
  if (!v.is_boolean()) bad(where, "'" + where + "' must be true or false, got " + describe_json(v));
  return v.get<bool>();
}

// Deepest nesting of arrays and objects in JSON text, strings skipped: a schema sent as a
// string is checked against the body's own limit before anything parses it.
int json_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// The body with its keys in the order the client wrote them, parsed once, on first use.
class OrderedBody {
 public:
  explicit OrderedBody(std::string_view body) : body_(body) {}
  const ordered_json& at(std::initializer_list<const char*> path) {
    if (!parsed_) {
      doc_ = ordered_json::parse(body_);  // parse_json_object has checked it and its depth
      parsed_ = true;
    }
    const ordered_json* v = &doc_;
    for (const char* k : path) v = &v->at(k);
    return *v;
  }

 private:
  std::string_view body_;
  ordered_json doc_;
  bool parsed_ = false;
};

// A JSON Schema given as an object, a boolean, or JSON text in a string (vLLM's guided_json
// and structured_outputs.json take either), as the text build_grammar parses, keys in order.
std::string schema_text(const json& v, OrderedBody& ob, std::initializer_list<const char*> path,
                        const std::string& where) {
  if (v.is_object() || v.is_boolean()) return ob.at(path).dump();
  if (!v.is_string()) {
    bad(where, "'" + where + "' must be a JSON Schema (an object), got " + describe_json(v));
  }
  const std::string& text = v.get_ref<const std::string&>();
  if (json_depth(text) > kMaxJsonDepth) {
    bad(where, "'" + where + "' nests arrays and objects more than " +
                   std::to_string(kMaxJsonDepth) + " levels deep");
  }
  ordered_json schema;
  try {
    schema = ordered_json::parse(text);
  } catch (const ordered_json::exception&) {
    bad(where, "'" + where + "' is a string but not JSON text: " + excerpt(text));
  }
  if (!schema.is_object() && !schema.is_boolean()) {
    bad(where, "'" + where + "' must be a JSON Schema (an object)");
  }
  return schema.dump();
}

std::vector<std::string> choices(const json& v, const std::string& where) {
  if (!v.is_array() || v.empty()) {
    bad(where, "'" + where + "' must be a non-empty array of strings, got " + describe_json(v));
  }
  std::vector<std::string> out;
  out.reserve(v.size());
  for (const json& c : v) out.push_back(string_at(c, where));
  return out;
}

ConstraintSpec json_schema_spec(std::string text, bool strict) {
  ConstraintSpec s;
  s.kind = ConstraintKind::json_schema;
  s.text = std::move(text);
  s.json.strict = strict;
  return s;
}

ConstraintSpec text_spec(ConstraintKind kind, std::string text) {
  ConstraintSpec s;
  s.kind = kind;
  s.text = std::move(text);
  return s;
}

// OpenAI's response_format; nullopt for {"type": "text"}.
std::optional<ConstraintSpec> response_format(const json& rf, OrderedBody& ob) {
  if (!rf.is_object() || !rf.contains("type")) {
    bad("response_format",
        "'response_format' must be an object with a 'type' (\"text\", \"json_object\" or "
        "\"json_schema\"), got " +
            describe_json(rf));
  }
  const std::string& type = string_at(rf["type"], "response_format.type");
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    // llama.cpp's extension: a json_object response_format may carry a schema.
    if (present(rf, "schema")) {
      return json_schema_spec(
          schema_text(rf["schema"], ob, {"response_format", "schema"}, "response_format.schema"),
          false);
    }
    ConstraintSpec s;
    s.kind = ConstraintKind::json_object;
    return s;
  }
  if (type != "json_schema") {
    bad("response_format.type",
        "'response_format.type' must be \"text\", \"json_object\" or "
        "\"json_schema\", got \"" +
            excerpt(type) + "\"");
  }
  if (present(rf, "schema")) {  // llama.cpp writes the schema beside the type
    return json_schema_spec(
        schema_text(rf["schema"], ob, {"response_format", "schema"}, "response_format.schema"),
        false);
  }
  if (!present(rf, "json_schema") || !rf["json_schema"].is_object()) {
    bad("response_format.json_schema",
        "'response_format' of type \"json_schema\" needs a 'json_schema' object with the "
        "'schema'");
  }
  const json& js = rf["json_schema"];
  if (present(js, "name")) string_at(js["name"], "response_format.json_schema.name");
  const bool strict =
      present(js, "strict") && bool_at(js["strict"], "response_format.json_schema.strict");
  if (!present(js, "schema")) {
    bad("response_format.json_schema.schema", "'response_format.json_schema.schema' is required");
  }
  return json_schema_spec(
      schema_text(js["schema"], ob, {"response_format", "json_schema", "schema"},
                  "response_format.json_schema.schema"),
      strict);
}

// vLLM's structured_outputs object: exactly one of json, regex, choice, grammar, json_object.
ConstraintSpec structured_outputs(const json& so, OrderedBody& ob) {
  const std::string where = "structured_outputs";
  if (!so.is_object())
    bad(where, "'structured_outputs' must be an object, got " + describe_json(so));
  for (const char* k : {"whitespace_pattern", "structural_tag"}) {
    if (present(so, k)) {
      bad(where + "." + k, "'structured_outputs." + std::string(k) + "' is not supported by lift");
    }
  }
  std::vector<std::string> kinds;
  for (const char* k : {"json", "regex", "choice", "grammar", "json_object"}) {
    if (present(so, k) && !(std::string_view(k) == "json_object" && so[k] == false))
      kinds.emplace_back(k);
  }
  if (kinds.size() != 1) {
    bad(where, kinds.empty() ? "'structured_outputs' needs one of json, regex, choice, grammar "
                               "or json_object"
                             : "'structured_outputs' may hold only one of json, regex, choice, "
                               "grammar and json_object; it has " +
                                   kinds[0] + " and " + kinds[1]);
  }
  const std::string& k = kinds[0];
  const std::string at = where + "." + k;
  ConstraintSpec s;
  if (k == "json") {
    s = json_schema_spec(schema_text(so["json"], ob, {"structured_outputs", "json"}, at), false);
  } else if (k == "regex") {
    s = text_spec(ConstraintKind::regex, string_at(so["regex"], at));
  } else if (k == "choice") {
    s.kind = ConstraintKind::choice;
    s.choices = choices(so["choice"], at);
  } else if (k == "grammar") {
    s = text_spec(ConstraintKind::grammar, string_at(so["grammar"], at));
  } else {
    bool_at(so["json_object"], at);
    s.kind = ConstraintKind::json_object;
  }
  if (present(so, "disable_any_whitespace") &&
      bool_at(so["disable_any_whitespace"], where + ".disable_any_whitespace")) {
    s.json.max_whitespace = 0;
  }
  if (present(so, "disable_additional_properties") &&
      bool_at(so["disable_additional_properties"], where + ".disable_additional_properties")) {
    s.json.strict = true;  // additionalProperties false unless the schema says otherwise
  }
  return s;
}

}  // namespace

std::optional<ConstraintRequest> parse_constraint_fields(const json& b, std::string_view body) {
  OrderedBody ob(body);
  std::vector<ConstraintRequest> found;
  auto add = [&](const char* param, ConstraintSpec s) { found.push_back({std::move(s), param}); };
  if (present(b, "response_format")) {
    if (auto s = response_format(b["response_format"], ob)) add("response_format", std::move(*s));
  }
  if (present(b, "structured_outputs")) {
    add("structured_outputs", structured_outputs(b["structured_outputs"], ob));
  }
  if (present(b, "guided_json")) {
    add("guided_json",
        json_schema_spec(schema_text(b["guided_json"], ob, {"guided_json"}, "guided_json"), false));
  }
  if (present(b, "guided_regex")) {
    add("guided_regex",
        text_spec(ConstraintKind::regex, string_at(b["guided_regex"], "guided_regex")));
  }
  if (present(b, "guided_choice")) {
    ConstraintSpec s;
    s.kind = ConstraintKind::choice;
    s.choices = choices(b["guided_choice"], "guided_choice");
    add("guided_choice", std::move(s));
  }
  if (present(b, "guided_grammar")) {
    add("guided_grammar",
        text_spec(ConstraintKind::grammar, string_at(b["guided_grammar"], "guided_grammar")));
  }
  // llama.cpp sends "grammar": "" for none.
  if (present(b, "grammar") && b["grammar"] != "") {
    add("grammar", text_spec(ConstraintKind::grammar, string_at(b["grammar"], "grammar")));
  }
  if (present(b, "json_schema")) {
    add("json_schema",
        json_schema_spec(schema_text(b["json_schema"], ob, {"json_schema"}, "json_schema"), false));
  }
  if (present(b, "guided_whitespace_pattern")) {
    bad("guided_whitespace_pattern", "'guided_whitespace_pattern' is not supported by lift");
  }
  if (present(b, "guided_decoding_backend")) {
    string_at(b["guided_decoding_backend"], "guided_decoding_backend");  // lift has one backend
  }
  if (found.empty()) return std::nullopt;
  if (found.size() > 1) {
    bad(found[1].param, "a request may give one output constraint, but it gives both '" +
                            found[0].param + "' and '" + found[1].param + "'");
  }
  return std::move(found[0]);
}

std::shared_ptr<const structured::CompiledGrammar> compile_constraint(
    structured::ConstraintCompiler& compiler, const ConstraintRequest& c) {
  try {
    return compiler.compile(c.spec);
  } catch (const structured::GrammarError& e) {
    // The compilers' messages name the keyword and where it is; bounded, as every message
    // that may quote a client's text.
    bad(c.param, "'" + c.param + "' cannot be used: " + excerpt(e.what(), 400));
  } catch (const structured::CompilerBusy& e) {
    throw ApiError(503, e.what(), c.param, "server_error", "overloaded");
  }
}

}  // namespace lift
