// The structured-output fields of completion and chat bodies: each dialect (OpenAI
// response_format, vLLM structured_outputs and guided_*, llama.cpp grammar / json_schema)
// becomes one compiled constraint on the request; two at once, malformed values and
// constraints that do not compile are 400s naming the field.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "structured/token_vocab.h"
#include "test_paths.h"

namespace lift {
namespace {

using structured::ConstraintKind;

const Tokenizer& stories() {
  static const Tokenizer t = Tokenizer::load(test::model_path("stories260K/stories260K.gguf"));
  return t;
}

structured::ConstraintCompiler& compiler() {
  static structured::ConstraintCompiler c(structured::TokenVocab::from_tokenizer(stories()));
  return c;
}

ApiContext context() {
  ApiContext ctx{stories(), ChatFormat::chatml, 2048, 512};
  ctx.constraints = &compiler();
  return ctx;
}

ApiRequest completion(const std::string& fields) {
  return parse_completion_request(R"({"prompt": "Once", "max_tokens": 8, )" + fields + "}",
                                  context());
}
ApiRequest chat(const std::string& fields) {
  return parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, )" + fields + "}",
      context());
}

ApiError error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than ApiError: " << e.what();
    return ApiError(0, "");
  }
  ADD_FAILURE() << "no error";
  return ApiError(0, "");
}

void expect_400(const std::function<void()>& f, const std::string& param,
                const std::string& needle) {
  const ApiError e = error_of(f);
  EXPECT_EQ(e.status(), 400) << e.what();
  EXPECT_EQ(e.param(), param) << e.what();
  EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
}

// The compiled grammar accepts `yes` and refuses `no` as whole texts.
void expect_language(const ApiRequest& r, const std::string& yes, const std::string& no) {
  ASSERT_TRUE(r.params.constraint);
  const structured::Grammar& g = r.params.constraint->grammar();
  EXPECT_TRUE(g.matches(yes)) << yes;
  EXPECT_FALSE(g.matches(no)) << no;
}

constexpr const char* kSchema =
    R"({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "boolean"}},
        "required": ["b", "a"], "additionalProperties": false})";

TEST(StructuredRequest, OpenAiResponseFormatOnChatAndCompletions) {
  const std::string rf = std::string(R"("response_format": {"type": "json_schema",
      "json_schema": {"name": "x", "strict": true, "schema": )") +
                         kSchema + "}}";
  for (const ApiRequest& r : {chat(rf), completion(rf)}) {
    ASSERT_TRUE(r.constraint);
    EXPECT_EQ(r.constraint->param, "response_format");
    EXPECT_EQ(r.constraint->spec.kind, ConstraintKind::json_schema);
    EXPECT_TRUE(r.constraint->spec.json.strict);
    // Key order as the client wrote it: "b" before "a".
    EXPECT_LT(r.constraint->spec.text.find("\"b\""), r.constraint->spec.text.find("\"a\""));
    expect_language(r, R"({"b": 3, "a": true})", R"({"b": 3})");
  }
  const ApiRequest obj = chat(R"("response_format": {"type": "json_object"})");
  ASSERT_TRUE(obj.constraint);
  EXPECT_EQ(obj.constraint->spec.kind, ConstraintKind::json_object);
  expect_language(obj, R"({"k": [1, "x"]})", "[1]");
  EXPECT_FALSE(chat(R"("response_format": {"type": "text"})").params.constraint);
  EXPECT_FALSE(completion(R"("temperature": 0)").params.constraint);
}

TEST(StructuredRequest, VllmAndLlamaCppFields) {
  expect_language(completion(R"("guided_regex": "[0-9]{2}")"), "42", "4");
  expect_language(completion(R"("guided_choice": ["red", "blue"])"), "blue", "green");
  expect_language(completion(R"("guided_grammar": "root ::= \"a\"+")"), "aaa", "b");
  expect_language(completion(R"("guided_json": {"type": "integer"})"), "12", "\"12\"");
  // A schema as JSON text in a string, as vLLM takes it.
  expect_language(completion(R"("guided_json": "{\"type\": \"boolean\"}")"), "true", "1");
  expect_language(completion(R"("structured_outputs": {"regex": "ab?"})"), "a", "b");
  expect_language(completion(R"("structured_outputs": {"choice": ["x"]})"), "x", "y");
  expect_language(completion(R"("structured_outputs": {"json": {"type": "null"}})"), "null", "0");
  expect_language(completion(R"("structured_outputs": {"grammar": "root ::= [xy]"})"), "y", "z");
  expect_language(completion(R"("structured_outputs": {"json_object": true})"), "{}", "[]");
  expect_language(completion(R"("grammar": "root ::= \"ok\"")"), "ok", "no");
  expect_language(completion(R"("json_schema": {"type": "string", "maxLength": 2})"), "\"ab\"",
                  "\"abc\"");
  // llama.cpp's json_object response_format with a schema.
  expect_language(
      chat(R"("response_format": {"type": "json_object", "schema": {"type": "integer"}})"), "7",
      "{}");
  const ApiRequest compact = completion(
      R"("structured_outputs": {"json": {"type": "array"}, "disable_any_whitespace": true})");
  EXPECT_EQ(compact.constraint->spec.json.max_whitespace, 0u);
  expect_language(compact, "[1,2]", "[1, 2]");
  // llama.cpp sends an empty grammar for none.
  EXPECT_FALSE(completion(R"("grammar": "")").params.constraint);
}

TEST(StructuredRequest, OneConstraintPerRequest) {
  expect_400([] { completion(R"("guided_regex": "a", "guided_choice": ["a"])"); }, "guided_choice",
             "'guided_regex' and 'guided_choice'");
  expect_400(
      [] { chat(R"("response_format": {"type": "json_object"}, "grammar": "root ::= \"a\"")"); },
      "grammar", "both 'response_format' and 'grammar'");
  expect_400([] { completion(R"("structured_outputs": {"regex": "a", "choice": ["a"]})"); },
             "structured_outputs", "regex and choice");
}

TEST(StructuredRequest, MalformedFieldsAndUncompilableConstraintsAre400) {
  expect_400([] { chat(R"("response_format": {"type": "xml"})"); }, "response_format.type",
             "\"xml\"");
  expect_400([] { chat(R"("response_format": {"type": "json_schema"})"); },
             "response_format.json_schema", "needs a 'json_schema' object");
  expect_400(
      [] { chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})"); },
      "response_format.json_schema.schema", "is required");
  expect_400([] { completion(R"("guided_choice": [])"); }, "guided_choice", "non-empty array");
  expect_400([] { completion(R"("guided_choice": ["a", 3])"); }, "guided_choice", "a string");
  expect_400([] { completion(R"("guided_json": "{not json")"); }, "guided_json", "not JSON text");
  expect_400([] { completion(R"("guided_json": 3)"); }, "guided_json", "JSON Schema");
  expect_400([] { completion(R"("guided_whitespace_pattern": " *")"); },
             "guided_whitespace_pattern", "not supported");
  expect_400(
      [] { completion(R"("structured_outputs": {"regex": "a", "whitespace_pattern": " "})"); },
      "structured_outputs.whitespace_pattern", "not supported");
  // The compilers' own errors, under the field's name.
  expect_400([] { completion(R"("guided_regex": "a(b")"); }, "guided_regex",
             "'guided_regex' cannot be used: ");
  expect_400([] { completion(R"("grammar": "root ::= undefined_rule")"); }, "grammar",
             "'grammar' cannot be used: ");
  expect_400(
      [] {
        chat(R"("response_format": {"type": "json_schema", "json_schema":
                {"name": "x", "schema": {"$ref": "#/$defs/missing"}}})");
      },
      "response_format", "'response_format' cannot be used: ");
  // A deeply nested schema in a string is refused before anything parses it.
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  expect_400([&] { completion(R"("guided_json": ")" + deep + R"(")"); }, "guided_json",
             "levels deep");
}

TEST(StructuredRequest, NoCompilerMeans400AndTheCacheReturnsOneGrammar) {
  ApiContext bare{stories(), ChatFormat::chatml, 2048, 512};
  expect_400([&] { parse_completion_request(R"({"prompt": "x", "guided_regex": "a"})", bare); },
             "guided_regex", "not available");
  const ApiRequest a = completion(R"("guided_regex": "[a-c]{3}")");
  const ApiRequest b = chat(R"("guided_regex": "[a-c]{3}")");
  EXPECT_EQ(a.params.constraint.get(), b.params.constraint.get());
}

}  // namespace
}  // namespace lift
