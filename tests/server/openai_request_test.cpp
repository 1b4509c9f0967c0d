// Request parsing against hostile bodies: nesting deep enough to overflow any recursive walk,
// huge strings and arrays in the fields an error message names, values of the wrong type
// where a helper would throw something other than ApiError. Every case must end in a short,
// valid-UTF-8 ApiError that names the field.
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"
#include "test_paths.h"
#include "tokenizer/utf8.h"

namespace lift {
namespace {

using nlohmann::json;

const Tokenizer& stories() {
  static const Tokenizer t = Tokenizer::load(test::model_path("stories260K/stories260K.gguf"));
  return t;
}

ApiContext context() { return ApiContext{stories(), ChatFormat::chatml, 2048, 512}; }

// `depth` arrays nested inside one another around `inner`: "[[[...inner...]]]".
std::string nested(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

// The ApiError that f throws; a test failure when it throws nothing or something else.
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

// A client-facing error: the status, short, valid UTF-8, naming `needle`.
void expect_short_error(const ApiError& e, int status, const std::string& needle) {
  EXPECT_EQ(e.status(), status) << e.what();
  const std::string msg = e.what();
  EXPECT_LE(msg.size(), 300u) << msg.substr(0, 300);
  EXPECT_TRUE(is_valid_utf8(msg));
  EXPECT_NE(msg.find(needle), std::string::npos) << msg.substr(0, 300);
}

ApiError completion_error(const std::string& body, const ApiContext& ctx = context()) {
  return error_of([&] { (void)parse_completion_request(body, ctx); });
}
ApiError chat_error(const std::string& body, const ApiContext& ctx = context()) {
  return error_of([&] { (void)parse_chat_request(body, ctx); });
}

constexpr size_t kDeep = 100000;

// ---- Nesting ---------------------------------------------------------------------------------

TEST(OpenAiRequestNesting, DeepArraysInNAreRefusedWhileParsing) {
  // Once a segfault: the error path printed the value with a recursive dump().
  const std::string body = R"({"prompt": "hi", "n": )" + nested(kDeep) + "}";
  expect_short_error(completion_error(body), 400, "64 levels");
}

TEST(OpenAiRequestNesting, DeepArraysInOtherIntegerAndBooleanFields) {
  for (const char* field : {"max_tokens", "seed", "top_k", "logprobs", "stream", "ignore_eos"}) {
    SCOPED_TRACE(field);
    const std::string body =
        R"({"prompt": "hi", ")" + std::string(field) + R"(": )" + nested(kDeep) + "}";
    expect_short_error(completion_error(body), 400, "64 levels");
  }
  expect_short_error(completion_error(R"({"prompt": [1, )" + nested(kDeep) + "]}"), 400,
                     "64 levels");
}

TEST(OpenAiRequestNesting, DeepMessages) {
  expect_short_error(chat_error(R"({"messages": )" + nested(kDeep) + "}"), 400, "64 levels");
  const std::string deep_content =
      R"({"messages": [{"role": "user", "content": )" + nested(kDeep, R"("x")") + "}]}";
  expect_short_error(chat_error(deep_content), 400, "64 levels");
  // Objects as well as arrays.
  std::string objects;
  for (size_t i = 0; i < kDeep; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kDeep, '}');
  expect_short_error(
      chat_error(R"({"messages": [{"role": "user", "content": "x", "name": )" + objects + "}]}"),
      400, "64 levels");
}

TEST(OpenAiRequestNesting, DeepLogitBias) {
  expect_short_error(
      completion_error(R"({"prompt": "hi", "logit_bias": {"13": )" + nested(kDeep) + "}}"), 400,
      "64 levels");
}

TEST(OpenAiRequestNesting, LimitIsSixtyFourLevels) {
  // The body is level 1; an ignored field may nest down to level 64 and no further.
  const std::string ok = R"({"prompt": "hi", "max_tokens": 1, "metadata": )" + nested(63) + "}";
  EXPECT_NO_THROW((void)parse_completion_request(ok, context()));
  const std::string deep = R"({"prompt": "hi", "max_tokens": 1, "metadata": )" + nested(64) + "}";
  expect_short_error(completion_error(deep), 400, "64 levels");
  expect_short_error(error_of([&] { (void)parse_json_object(nested(kDeep)); }), 400, "64 levels");
}

TEST(OpenAiRequestNesting, MalformedJsonNamesTheOffsetNotTheText) {
  const std::string secret(100000, 'x');
  const ApiError e = completion_error(R"({"prompt": ")" + secret);
  expect_short_error(e, 400, "not valid JSON");
  EXPECT_EQ(std::string(e.what()).find("xxxxxxxxxx"), std::string::npos) << e.what();
  // Ill-formed UTF-8 inside a string is malformed JSON too.
  expect_short_error(completion_error("{\"prompt\": \"\xC0\x80\"}"), 400, "not valid JSON");
  expect_short_error(completion_error("[1, 2, 3]"), 400, "must be a JSON object");
  expect_short_error(completion_error(""), 400, "body is empty");
  // The offset never runs past the body (the parser counts the end of input as a byte).
  expect_short_error(completion_error(R"({"prompt": "hi")"), 400, "byte 15 of 15");
  expect_short_error(completion_error(R"({"prompt": "hi", "temperature": 1e99999})"), 400,
                     "number too large");
}

// ---- Huge values in error paths --------------------------------------------------------------

TEST(OpenAiRequestErrors, HugeValuesGiveShortMessages) {
  const std::string big(200000, 'a');
  std::string wide = "[";
  for (int i = 0; i < 50000; ++i) wide += (i ? ",1" : "1");
  wide += "]";
  // Every field that quotes the value it got.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "hi", "n": )" + wide + "}", "n"},
      {R"({"prompt": "hi", "n": ")" + big + R"("})", "n"},
      {R"({"prompt": "hi", "seed": ")" + big + R"("})", "seed"},
      {R"({"prompt": "hi", "max_tokens": )" + wide + "}", "max_tokens"},
      {R"({"prompt": "hi", "stream": ")" + big + R"("})", "stream"},
      {R"({"prompt": "hi", "temperature": ")" + big + R"("})", "temperature"},
      {R"({"prompt": "hi", "stop": [")" + big + R"("]})", "stop"},
      {R"({"prompt": "hi", "stop": )" + wide + "}", "stop"},
      {R"({"prompt": "hi", "stop_token_ids": [")" + big + R"("]})", "stop_token_ids"},
      {R"({"prompt": "hi", "logit_bias": {")" + big + R"(": 1}})", "logit_bias"},
      {R"({"prompt": "hi", "logit_bias": {"13": ")" + big + R"("}})", "logit_bias"},
      {R"({"prompt": [1, ")" + big + R"("]})", "prompt"},
      {R"({"prompt": {"a": ")" + big + R"("}})", "prompt"},
  };
  for (const auto& [body, field] : cases) {
    SCOPED_TRACE(body.substr(0, 60));
    const ApiError e = completion_error(body);
    expect_short_error(e, 400, field);
    EXPECT_EQ(e.param(), field);
  }
}

TEST(OpenAiRequestErrors, HugeRoleAndContentPartType) {
  const std::string big(200000, 'r');
  ApiError e = chat_error(R"({"messages": [{"role": ")" + big + R"(", "content": "x"}]})");
  expect_short_error(e, 400, "unsupported role 'rrrr");
  e = chat_error(R"({"messages": [{"role": "user", "content": [{"type": ")" + big + R"("}]}]})");
  expect_short_error(e, 400, "only text content parts");
  e = chat_error(R"({"messages": [{"role": "user", "content": [1]}]})");
  expect_short_error(e, 400, "messages[0].content[0]");
}

TEST(OpenAiRequestErrors, ExcerptsAreValidUtf8AndShort) {
  // Cut inside a multi-byte character, with control characters and a lone U+FFFD.
  std::string key;
  for (int i = 0; i < 1000; ++i) key += "\xC3\xA9\n";
  const ApiError k =
      completion_error(R"({"prompt": "hi", "logit_bias": )" + json({{key, 1}}).dump() + "}");
  expect_short_error(k, 400, "\xC3\xA9 \xC3\xA9");
  EXPECT_EQ(excerpt("abc"), "abc");
  EXPECT_EQ(excerpt(std::string(100, 'a'), 10), "aaaaaaaaaa...");
  EXPECT_EQ(excerpt("\xC3\xA9\xC3\xA9", 3), "\xC3\xA9...");
  EXPECT_EQ(excerpt("a\xFF"
                    "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(excerpt("a\tb\x7F"), "a b ");
  EXPECT_EQ(describe_json(json::array({1, 2})), "an array of 2 elements");
  EXPECT_EQ(describe_json(json::parse(R"({"a": 1})")), "an object with 1 key");
  EXPECT_EQ(describe_json(json::array({1})), "an array of 1 element");
  EXPECT_EQ(describe_json(json(2.5)), "2.5");
  EXPECT_EQ(describe_json(json("ten")), "the string \"ten\"");
}

TEST(OpenAiRequestErrors, WrongTypesInsideObjectsAreApiErrors) {
  // json::value("type", "") throws json::type_error for a non-string "type": these used to
  // escape as a 500 (and crash a caller that only catches ApiError).
  expect_short_error(
      chat_error(R"({"messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]})"), 400,
      "messages[0].content[0]");
  expect_short_error(
      chat_error(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]})"),
      400, "no string 'text'");
  expect_short_error(chat_error(R"({"messages": [{"role": "user", "content": "x"}],
                                    "response_format": {"type": 5}})"),
                     400, "response_format");
  // The text content parts that do work.
  const ApiRequest r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
          "max_tokens": 2, "response_format": {"type": "text"}})",
      context());
  EXPECT_FALSE(r.prompt.empty());
}

TEST(OpenAiRequestErrors, IntegerEdgeCases) {
  // Above INT64_MAX: reported as out of range with the value as sent, not wrapped.
  const ApiError e = completion_error(R"({"prompt": "hi", "max_tokens": 18446744073709551615})");
  expect_short_error(e, 400, "18446744073709551615");
  expect_short_error(completion_error(R"({"prompt": "hi", "n": 2.5})"), 400, "got 2.5");
  // A whole float is that integer (pydantic's lax mode, as vLLM takes it); a seed past 2^64
  // arrives as a double and is out of range, not "not an integer".
  EXPECT_EQ(parse_completion_request(R"({"prompt": "hi", "max_tokens": 5.0})", context())
                .params.max_tokens,
            5);
  EXPECT_EQ(
      parse_completion_request(R"({"prompt": "hi", "seed": 3e0})", context()).params.sampling.seed,
      3u);
  expect_short_error(completion_error(R"({"prompt": "hi", "seed": 18446744073709551616})"), 400,
                     "between");
  expect_short_error(completion_error(R"({"prompt": "hi", "max_tokens": 1e300})"), 400, "between");
  expect_short_error(completion_error(R"({"prompt": "hi", "logit_bias": {" 13": 1}})"), 400,
                     "\" 13\"");
  expect_short_error(completion_error(R"({"prompt": "hi", "logit_bias": {"+13": 1}})"), 400,
                     "\"+13\"");
  expect_short_error(completion_error(R"({"prompt": []})"), 400, "empty");
  expect_short_error(completion_error(R"({"prompt": [true]})"), 400,
                     "must be a string or an array of token ids, got an array");
  expect_short_error(completion_error(R"({"prompt": ["a", "b"]})"), 400, "batched prompts");
  const ApiRequest r =
      parse_completion_request(R"({"prompt": "hi", "logit_bias": {"13": -5}})", context());
  ASSERT_EQ(r.params.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.params.sampling.logit_bias[0].token, 13);
}

// ---- Server-side checks ----------------------------------------------------------------------

TEST(OpenAiRequestServer, UnknownModelIs404) {
  ApiContext ctx = context();
  ctx.served_model_names = {"stories260K", "tiny"};
  const std::string ok = R"({"prompt": "hi", "max_tokens": 1, "model": "tiny"})";
  EXPECT_NO_THROW((void)parse_completion_request(ok, ctx));
  EXPECT_NO_THROW((void)parse_completion_request(R"({"prompt": "hi", "max_tokens": 1})", ctx));
  const ApiError e = completion_error(R"({"prompt": "hi", "model": "gpt-4"})", ctx);
  EXPECT_EQ(e.status(), 404);
  EXPECT_STREQ(e.what(), "The model `gpt-4` does not exist.");
  EXPECT_EQ(e.param(), "model");
  EXPECT_EQ(e.type(), "invalid_request_error");
  EXPECT_EQ(e.code(), "model_not_found");
  const ApiError c = chat_error(R"({"messages": [{"role": "user", "content": "x"}], "model": ")" +
                                    std::string(5000, 'm') + R"("})",
                                ctx);
  expect_short_error(c, 404, "does not exist");
  expect_short_error(completion_error(R"({"prompt": "hi", "model": 5})", ctx), 400, "model");
  // Without names, any model is served.
  EXPECT_NO_THROW((void)parse_completion_request(
      R"({"prompt": "hi", "max_tokens": 1, "model": "gpt-4"})", context()));
}

TEST(OpenAiRequestServer, PriorityNeedsThePriorityPolicy) {
  ApiContext ctx = context();
  ctx.allow_priority = false;
  const ApiError e = completion_error(R"({"prompt": "hi", "priority": 5})", ctx);
  expect_short_error(e, 400, "--scheduling-policy priority");
  EXPECT_EQ(e.param(), "priority");
  EXPECT_NO_THROW(
      (void)parse_completion_request(R"({"prompt": "hi", "max_tokens": 1, "priority": 0})", ctx));
  ctx.allow_priority = true;
  EXPECT_EQ(parse_completion_request(R"({"prompt": "hi", "max_tokens": 1, "priority": -3})", ctx)
                .params.priority,
            -3);
}

TEST(OpenAiRequestServer, SpecTokensInCompletionsAndChat) {
  const ApiContext ctx = context();
  EXPECT_EQ(
      parse_completion_request(R"({"prompt": "hi", "max_tokens": 1})", ctx).params.spec_tokens, -1);
  for (int k : {-1, 0, 3, 16}) {
    SCOPED_TRACE(k);
    const std::string v = std::to_string(k);
    EXPECT_EQ(parse_completion_request(R"({"prompt": "hi", "spec_tokens": )" + v + "}", ctx)
                  .params.spec_tokens,
              k);
    EXPECT_EQ(
        parse_chat_request(
            R"({"messages": [{"role": "user", "content": "hi"}], "spec_tokens": )" + v + "}", ctx)
            .params.spec_tokens,
        k);
  }
  for (const char* bad : {"17", "-2", "2.5", "\"4\"", "true", "[4]"}) {
    SCOPED_TRACE(bad);
    for (const ApiError& e :
         {completion_error(R"({"prompt": "hi", "spec_tokens": )" + std::string(bad) + "}"),
          chat_error(R"({"messages": [{"role": "user", "content": "hi"}], "spec_tokens": )" +
                     std::string(bad) + "}")}) {
      expect_short_error(e, 400, "spec_tokens");
      EXPECT_EQ(e.param(), "spec_tokens");
    }
  }
}

TEST(OpenAiRequestServer, Tokenize) {
  TokenizeRequest t = parse_tokenize_request(R"({"prompt": "Once upon a time"})");
  EXPECT_EQ(t.text, "Once upon a time");
  EXPECT_TRUE(t.add_special);
  EXPECT_EQ(tokenize(stories(), t), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  t = parse_tokenize_request(R"({"content": "<s>a", "add_special_tokens": false})");
  EXPECT_EQ(t.text, "<s>a");
  EXPECT_FALSE(t.add_special);
  const auto plain = tokenize(stories(), t);
  EXPECT_NE(plain.front(), 1);  // no BOS, and "<s>" is text
  t = parse_tokenize_request(R"({"prompt": "<s>a", "add_special": true})");
  EXPECT_EQ(tokenize(stories(), t).front(), 1);
  // "add_special" wins over "add_special_tokens", as before.
  EXPECT_FALSE(
      parse_tokenize_request(R"({"prompt": "", "add_special_tokens": true, "add_special": false})")
          .add_special);
  // "prompt" wins over "content".
  EXPECT_EQ(parse_tokenize_request(R"({"prompt": "a", "content": "b"})").text, "a");

  const auto tok_error = [](const std::string& body) {
    return error_of([&] { (void)parse_tokenize_request(body); });
  };
  expect_short_error(tok_error(R"({"nothing": 1})"), 400, "'prompt'");
  expect_short_error(tok_error(R"({"prompt": 5})"), 400, "'prompt' must be a string");
  expect_short_error(tok_error(R"({"prompt": null})"), 400, "'prompt' must be a string");
  expect_short_error(tok_error(R"({"content": [1]})"), 400, "'content' must be a string");
  expect_short_error(tok_error(R"({"prompt": "a", "add_special": "yes"})"), 400, "add_special");
  expect_short_error(tok_error(R"({"prompt": )" + nested(kDeep) + "}"), 400, "64 levels");
}

TEST(OpenAiRequestServer, Detokenize) {
  const DetokenizeRequest d = parse_detokenize_request(R"({"tokens": [1, 403, 407]})", 512);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 403, 407}));
  const auto detok_error = [](const std::string& body) {
    return error_of([&] { (void)parse_detokenize_request(body, 512); });
  };
  expect_short_error(detok_error(R"({"tokens": [1, 99999]})"), 400, "511");
  expect_short_error(detok_error(R"({"tokens": [-1]})"), 400, "tokens");
  expect_short_error(detok_error(R"({"tokens": "abc"})"), 400, "'tokens' must be an array");
  expect_short_error(detok_error(R"({})"), 400, "'tokens' must be an array");
  std::string wide = "[";
  for (int i = 0; i < 50000; ++i) wide += (i ? ",1" : "1");
  wide += "]";
  expect_short_error(detok_error(R"({"tokens": [1, )" + wide + "]}"), 400, "an array of 50000");
  expect_short_error(detok_error(R"({"tokens": [1, )" + nested(kDeep) + "]}"), 400, "64 levels");
}

}  // namespace
}  // namespace lift
