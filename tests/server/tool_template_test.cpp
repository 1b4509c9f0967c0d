// Tools through the model's own template and back: an OpenAI tool-calling conversation (as
// a client sends it: arguments as a JSON string, tool results with tool_call_id) rendered by
// the real Qwen3, Qwen2.5, Llama 3.1 and Mistral templates exactly as Python's Jinja2 renders
// it; the call each template writes parses back into the call that was sent and fits the
// grammar that constrains tool_choice "required"; and the tools fields' errors.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/tool_calls.h"
#include "server/tool_request.h"
#include "structured/constraint.h"
#include "structured/token_vocab.h"
#include "template/oracle.h"
#include "test_paths.h"

namespace lift {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RealTemplate {
  std::string label;
  std::string source;
  ToolCallFormat format;
  std::string reply_start;  // what the template writes before an assistant turn's text
  std::string reply_end;    // and after it
};

const std::vector<RealTemplate>& templates() {
  static const std::vector<RealTemplate> all = [] {
    const std::string dir = std::string(LIFT_SOURCE_DIR) + "/tests/template/templates/";
    const std::string qwen3 =
        json::parse(read(test::model_path("tokenizers/qwen3/tokenizer_config.json")))
            .at("chat_template");
    return std::vector<RealTemplate>{
        // Qwen3 writes an empty reasoning block into the turn after the last question.
        {"qwen3", qwen3, ToolCallFormat::hermes, "<|im_start|>assistant\n<think>\n\n</think>\n\n",
         "<|im_end|>"},
        {"qwen2.5", read(dir + "qwen2.5-tools.jinja"), ToolCallFormat::hermes,
         "<|im_start|>assistant\n", "<|im_end|>"},
        {"llama3.1", read(dir + "llama3.1-tools.jinja"), ToolCallFormat::llama3_json,
         "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
        {"mistral-v0.3", read(dir + "mistral-v0.3-tools.jinja"), ToolCallFormat::mistral, "[/INST]",
         "</s>"},
    };
  }();
  return all;
}

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "unit": {"enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time"}}])";

// A whole tool round trip as the OpenAI SDK sends it after running the call. Content "" on
// the calling turn: Qwen3's template cannot take None there (Jinja2 fails on it too).
std::string round_trip_body(bool with_result) {
  std::string body = std::string(R"({"tools": )") + kTools + R"(, "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "abcDEF123", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Zürich\", \"unit\": \"c\"}"}}]})";
  if (with_result) {
    body += R"(, {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"temp\": 21}"})";
  }
  return body + "]" + (with_result ? "" : R"(, "add_generation_prompt": false)") + "}";
}

ordered_json context_of(const ChatInput& in) {
  return {{"messages", in.messages}, {"tools", in.tools},
          {"documents", nullptr},    {"add_generation_prompt", in.add_generation_prompt},
          {"bos_token", "<s>"},      {"eos_token", "</s>"}};
}

TEST(ToolCallTemplate, ToolConversationsRenderAsJinja2RendersThem) {
  std::vector<test::OracleCase> cases;
  for (const RealTemplate& t : templates()) {
    for (bool result : {true, false}) {
      const ChatInput in = parse_chat_input(round_trip_body(result));
      cases.push_back({t.label + (result ? " with the result" : " ending at the call"), t.source,
                       context_of(in)});
    }
  }
  EXPECT_EQ(test::expect_agreement(cases), cases.size());
  // And they render: no template refused the conversation.
  for (const test::OracleCase& c : cases) {
    EXPECT_TRUE(test::render_with_lift(c).ok) << c.label << ": " << test::render_with_lift(c).text;
  }
}

// What each template writes for the assistant's call is what the parser for its format
// reads back, and what the grammar for tool_choice "required" allows (Mistral's template adds
// the id, which its model does not write itself).
TEST(ToolCallTemplate, TheCallATemplateWritesParsesBackAndFitsTheGrammar) {
  for (const RealTemplate& t : templates()) {
    ASSERT_EQ(detect_tool_call_format(t.source), t.format) << t.label;
    const ChatTemplate tmpl(t.source, t.label);
    const std::string text = tmpl.render(parse_chat_input(round_trip_body(false)), "<s>", "</s>");
    const size_t start = text.rfind(t.reply_start);
    ASSERT_NE(start, std::string::npos) << t.label << ": " << text;
    std::string reply = text.substr(start + t.reply_start.size());
    reply = reply.substr(0, reply.rfind(t.reply_end));
    const ToolCallSetup setup{t.format, {"get_weather", "get_time"}};
    const ParsedToolCalls p = parse_tool_calls(setup, reply);
    ASSERT_EQ(p.calls.size(), 1u) << t.label << ": " << reply;
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"city": "Zürich", "unit": "c"})"))
        << t.label;
    EXPECT_EQ(p.content, "") << t.label;

    if (t.format == ToolCallFormat::mistral) continue;
    const json body = json::parse(round_trip_body(false));
    const ToolRequest r = parse_tool_request(body, ordered_json::parse(kTools));
    EXPECT_TRUE(tool_call_grammar(r, t.format).matches(reply)) << t.label << ": " << reply;
  }
}

ToolRequest required(bool parallel, const std::string& choice = "\"required\"") {
  const std::string body = std::string(R"({"tools": )") + kTools + R"(, "tool_choice": )" + choice +
                           R"(, "parallel_tool_calls": )" + (parallel ? "true" : "false") + "}";
  return parse_tool_request(json::parse(body), ordered_json::parse(kTools));
}

TEST(ToolCallGrammar, OnlyCallsOfTheToolsWithValidArguments) {
  const std::string w = R"({"name": "get_weather", "arguments": {"city": "Oslo"}})";
  const std::string t = R"({"name": "get_time", "arguments": {}})";
  const auto hermes = [](const std::string& call) {
    return "<tool_call>\n" + call + "\n</tool_call>";
  };
  const structured::Grammar one = tool_call_grammar(required(false), ToolCallFormat::hermes);
  EXPECT_TRUE(one.matches(hermes(w)));
  EXPECT_TRUE(one.matches(hermes(t)));
  EXPECT_FALSE(one.matches(hermes(w) + "\n" + hermes(t)));  // parallel_tool_calls false
  EXPECT_FALSE(one.matches("Sure. " + hermes(w)));
  EXPECT_FALSE(one.matches(hermes(R"({"name": "get_weather", "arguments": {}})")));  // city
  EXPECT_FALSE(one.matches(hermes(R"({"name": "get_weather", "arguments": {"city": 3}})")));
  EXPECT_FALSE(one.matches(hermes(R"({"name": "get_time", "arguments": {"x": 1}})")));
  EXPECT_FALSE(one.matches(hermes(R"({"name": "other", "arguments": {}})")));

  const structured::Grammar many = tool_call_grammar(required(true), ToolCallFormat::hermes);
  EXPECT_TRUE(many.matches(hermes(w) + "\n" + hermes(t) + "\n" + hermes(w)));

  const structured::Grammar named =
      tool_call_grammar(required(true, R"({"type": "function", "function": {"name": "get_time"}})"),
                        ToolCallFormat::llama3_json);
  EXPECT_TRUE(named.matches(R"({"name": "get_time", "parameters": {}})"));
  EXPECT_TRUE(named.matches(
      R"({"name": "get_time", "parameters": {}}; {"name": "get_time", "parameters": {}})"));
  EXPECT_FALSE(named.matches(R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_FALSE(named.matches(R"({"name": "get_time", "arguments": {}})"));

  const structured::Grammar mistral = tool_call_grammar(required(true), ToolCallFormat::mistral);
  EXPECT_TRUE(mistral.matches("[" + w + ", " + t + "]"));
  EXPECT_FALSE(mistral.matches("[]"));
}

ApiContext context(const ChatTemplate& t, structured::ConstraintCompiler* c = nullptr) {
  static const Tokenizer tok = Tokenizer::load(test::model_path("stories260K/stories260K.gguf"));
  ApiContext ctx{tok, t, 4096, 512};
  ctx.constraints = c;
  return ctx;
}

ApiError chat_error(const std::string& body, const ApiContext& ctx) {
  try {
    (void)parse_chat_request(body, ctx);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

TEST(ToolCallRequest, BadToolsAreA400NamingTheField) {
  const ApiContext ctx = context(ChatFormat::chatml);
  const std::string msgs = R"("messages": [{"role": "user", "content": "Hi"}])";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {R"("tools": [{"type": "retrieval"}])", "tools", "\"type\": \"function\""},
      {R"("tools": [{"type": "function"}])", "tools", "'function' object"},
      {R"("tools": [{"type": "function", "function": {"name": "a b"}}])", "tools", "letters"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}])", "tools",
       "JSON Schema object"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}},
                    {"type": "function", "function": {"name": "f"}}])",
       "tools", "second time"},
      {R"("tool_choice": "required")", "tool_choice", "no 'tools'"},
      {R"("tool_choice": "sometimes")", "tool_choice", "\"required\""},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}],
          "tool_choice": {"type": "function", "function": {"name": "g"}})",
       "tool_choice", "not one of the request's tools"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": 1)",
       "parallel_tool_calls", "true or false"},
      // No constraint compiler in this context: required cannot be honoured.
      {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required")",
       "tool_choice", "not available"},
  };
  for (const auto& [fields, param, needle] : cases) {
    const ApiError e = chat_error("{" + msgs + ", " + fields + "}", ctx);
    EXPECT_EQ(e.status(), 400) << fields;
    EXPECT_EQ(e.param(), param) << fields;
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << fields << ": " << e.what();
  }
}

TEST(ToolCallRequest, ChoiceNoneRendersNoToolsAndParsesNothing) {
  const ChatTemplate t("{% if tools %}[tools]{% endif %}{{ messages[0].content }}", "test");
  const ApiContext ctx = context(t);
  const std::string base =
      R"({"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function",
          "function": {"name": "f"}}])";
  const ApiRequest with = parse_chat_request(base + "}", ctx);
  const ApiRequest none = parse_chat_request(base + R"(, "tool_choice": "none"})", ctx);
  EXPECT_EQ(with.tool_calls.format, ToolCallFormat::hermes);  // no syntax in it: the default
  EXPECT_EQ(with.tool_calls.names, std::vector<std::string>{"f"});
  EXPECT_EQ(none.tool_calls.format, ToolCallFormat::none);
  EXPECT_EQ(none.prompt, context(t).tok.encode("Hi", false, true));
  EXPECT_NE(with.prompt, none.prompt);
  EXPECT_FALSE(with.params.constraint);  // auto: parsed, not constrained
  // --tool-call-parser chooses the syntax whatever the template says.
  ApiContext mistral = context(t);
  mistral.tool_format = ToolCallFormat::mistral;
  EXPECT_EQ(parse_chat_request(base + "}", mistral).tool_calls.format, ToolCallFormat::mistral);
}

TEST(ToolCallRequest, RequiredIsCompiledOnceAndExcludesOtherConstraints) {
  auto vocab = structured::TokenVocab::from_tokenizer(context(ChatFormat::chatml).tok);
  structured::ConstraintCompiler compiler(vocab);
  const ApiContext ctx = context(ChatFormat::chatml, &compiler);
  const std::string body = std::string(R"({"messages": [{"role": "user", "content": "Hi"}],
      "tool_choice": "required", "tools": )") +
                           kTools;
  const ApiRequest a = parse_chat_request(body + "}", ctx);
  const ApiRequest b = parse_chat_request(body + "}", ctx);
  ASSERT_TRUE(a.params.constraint);
  EXPECT_EQ(a.params.constraint, b.params.constraint);  // from the cache
  structured::Matcher m(a.params.constraint);
  EXPECT_TRUE(m.accept_bytes(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"));
  EXPECT_TRUE(m.can_end());
  structured::Matcher other(a.params.constraint);
  EXPECT_FALSE(other.accept_bytes("Hello"));

  const ApiError e = chat_error(body + R"(, "response_format": {"type": "json_object"}})", ctx);
  EXPECT_EQ(e.param(), "tool_choice") << e.what();
  const ApiError s = chat_error(
      R"({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "required",
          "tools": [{"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "string",
              "pattern": "(a)\\1"}}}}}]})",
      ctx);
  EXPECT_EQ(s.param(), "tools") << s.what();
  EXPECT_NE(std::string(s.what()).find("\"f\""), std::string::npos) << s.what();
}

// The response side: the chunks a streamed reply becomes, and the whole message.
TEST(ToolCallResponse, StreamedDeltasInOpenAIsShapeAndTheWholeMessage) {
  ApiRequest req;
  req.chat = true;
  req.params.n = 1;
  req.tool_calls = {ToolCallFormat::hermes, {"get_weather"}};
  const std::string text =
      "Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}\n</tool_call>";
  for (size_t step : {size_t{1}, size_t{5}, text.size()}) {
    ResponseBuilder rb(req, context(ChatFormat::chatml).tok, "id", "m");
    std::string content, args, id;
    int named = 0;
    size_t sent = 0;
    for (size_t at = 0; at < text.size(); at += step) {
      RequestOutput o;
      o.text = text.substr(at, step);
      if (at + step >= text.size()) o.finish = FinishReason::stop;
      const json c = rb.chunk(o);
      if (c.is_null()) {
        EXPECT_EQ(o.finish, FinishReason::none);  // only held-back text sends nothing
        continue;
      }
      ++sent;
      const json& ch = c["choices"][0];
      const json& d = ch["delta"];
      if (d.contains("content")) content += d["content"].get<std::string>();
      for (const json& tc : d.value("tool_calls", json::array())) {
        EXPECT_EQ(tc["index"], 0);
        if (tc.contains("id")) {
          ++named;
          id = tc["id"];
          EXPECT_EQ(tc["type"], "function");
          EXPECT_EQ(tc["function"]["name"], "get_weather");
        }
        args += tc["function"]["arguments"].get<std::string>();
      }
      if (o.finish != FinishReason::none) {
        EXPECT_EQ(ch["finish_reason"], "tool_calls");
      }
    }
    EXPECT_EQ(content, "Checking.") << step;
    EXPECT_EQ(args, "{\"city\": \"Oslo\"}") << step;
    EXPECT_EQ(named, 1) << step;
    EXPECT_TRUE(id.starts_with("call_"));
    EXPECT_LE(sent, (text.size() + step - 1) / step);  // at most one chunk per step

    SampleAccum whole;
    whole.text = text;
    whole.finish = FinishReason::stop;
    const json full = rb.full({whole}, 3)["choices"][0];
    EXPECT_EQ(full["finish_reason"], "tool_calls");
    EXPECT_EQ(full["message"]["content"], "Checking.");
    EXPECT_EQ(full["message"]["tool_calls"][0]["function"]["arguments"], args);
  }
  // Cut by max_tokens: the call is there, the finish reason stays "length".
  ResponseBuilder rb(req, context(ChatFormat::chatml).tok, "id", "m");
  SampleAccum cut;
  cut.text = text.substr(0, 55);  // past the name, inside the arguments
  cut.finish = FinishReason::length;
  const json full = rb.full({cut}, 3)["choices"][0];
  EXPECT_EQ(full["finish_reason"], "length");
  EXPECT_EQ(full["message"]["content"], "Checking.");
  EXPECT_EQ(full["message"]["tool_calls"].size(), 1u);
}

}  // namespace
}  // namespace lift
