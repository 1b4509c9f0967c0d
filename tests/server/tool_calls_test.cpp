// Tool-call parsing: each model family's syntax into calls and content, the same for every
// chunking of the text, and text that is not a call left exactly as written.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "server/json_scanner.h"
#include "test_paths.h"
#include "util/error.h"

namespace lift {
namespace {

const std::vector<std::string> kTools = {"get_weather", "search"};

ToolCallSetup setup(ToolCallFormat f) { return {f, kTools}; }

ParsedToolCalls parse(ToolCallFormat f, std::string_view text) {
  return parse_tool_calls(setup(f), text);
}

std::string describe(const ParsedToolCalls& p) {
  std::string s = "content=[" + p.content + "]";
  for (const auto& c : p.calls) s += " call " + c.name + "(" + c.arguments + ")";
  return s;
}

// Feeds `text` in chunks cut at `cuts` (sorted offsets).
ParsedToolCalls parse_chunked(ToolCallFormat f, std::string_view text,
                              const std::vector<size_t>& cuts) {
  ToolCallParser p(setup(f));
  ParsedToolCalls out;
  size_t at = 0;
  for (size_t cut : cuts) {
    out.add(p.feed(text.substr(at, cut - at)));
    at = cut;
  }
  out.add(p.feed(text.substr(at)));
  out.add(p.finish());
  return out;
}

// Every chunking gives what the whole text gives: one byte at a time, and random cuts.
void expect_chunking_invariant(ToolCallFormat f, std::string_view text) {
  const std::string whole = describe(parse(f, text));
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  EXPECT_EQ(describe(parse_chunked(f, text, every)), whole) << "byte by byte: " << text;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i) {
      if (rng() % 5 == 0) cuts.push_back(i);
    }
    EXPECT_EQ(describe(parse_chunked(f, text, cuts)), whole) << "trial " << trial << ": " << text;
  }
}

TEST(ToolCallParse, HermesCallsAfterContent) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": [1, 2.5e3]}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", "
      "\"arguments\": {\"q\": \"a \\\"b\\\" }\"}}\n</tool_call>";
  const ParsedToolCalls p = parse(ToolCallFormat::hermes, text);
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u) << describe(p);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Paris\", \"days\": [1, 2.5e3]}");
  EXPECT_EQ(p.calls[1].name, "search");
  EXPECT_EQ(p.calls[1].arguments, "{\"q\": \"a \\\"b\\\" }\"}");
  EXPECT_EQ(nlohmann::json::parse(p.calls[1].arguments)["q"], "a \"b\" }");
  expect_chunking_invariant(ToolCallFormat::hermes, text);
}

TEST(ToolCallParse, ArgumentsBeforeNameAndOtherKeysAndNoArguments) {
  const ParsedToolCalls p =
      parse(ToolCallFormat::hermes,
            "<tool_call>{\"type\": \"function\", \"arguments\": {\"x\": {\"y\": null}}, \"name\": "
            "\"search\"}</tool_call><tool_call>{\"name\":\"get_weather\"}</tool_call>");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 2u) << describe(p);
  EXPECT_EQ(p.calls[0].name, "search");
  EXPECT_EQ(p.calls[0].arguments, "{\"x\": {\"y\": null}}");
  EXPECT_EQ(p.calls[1].arguments, "{}");
}

TEST(ToolCallParse, Llama3JsonAtTheStartOnly) {
  const std::string one = " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
  ParsedToolCalls p = parse(ToolCallFormat::llama3_json, one);
  ASSERT_EQ(p.calls.size(), 1u) << describe(p);
  EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Oslo\"}");
  EXPECT_EQ(p.content, "");

  const std::string two =
      "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": 1}}; {\"name\": "
      "\"get_weather\", \"parameters\": {}}";
  p = parse(ToolCallFormat::llama3_json, two);
  ASSERT_EQ(p.calls.size(), 2u) << describe(p);
  EXPECT_EQ(p.calls[1].name, "get_weather");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  expect_chunking_invariant(ToolCallFormat::llama3_json, two);

  // After content, a JSON object is content: Llama writes its calls as the whole reply.
  p = parse(ToolCallFormat::llama3_json, "Sure: " + one);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "Sure: " + one);
}

TEST(ToolCallParse, MistralWithAndWithoutTheControlTokensText) {
  const std::string list =
      "[{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}, \"id\": \"abcDEF123\"}, {\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]";
  for (const std::string& text : {"[TOOL_CALLS] " + list, list, "Hmm. [TOOL_CALLS]" + list}) {
    const ParsedToolCalls p = parse(ToolCallFormat::mistral, text);
    ASSERT_EQ(p.calls.size(), 2u) << text << " -> " << describe(p);
    EXPECT_EQ(p.calls[0].arguments, "{\"q\": \"x\"}");
    EXPECT_EQ(p.calls[1].name, "get_weather");
    EXPECT_EQ(p.content, text.starts_with("Hmm") ? "Hmm." : "");
    expect_chunking_invariant(ToolCallFormat::mistral, text);
  }
}

// Output that is not a call (no marker, bad JSON, no name, a name that is not a tool) comes
// back as content byte for byte, whatever the chunking.
TEST(ToolCallParse, WhatIsNotACallIsContentAsWritten) {
  const std::vector<std::pair<ToolCallFormat, std::string>> cases = {
      {ToolCallFormat::hermes, "Plain text, with  spaces \n\n"},
      {ToolCallFormat::hermes, "a <tool b <tool_call x <tool_call>{\"name\": 3}"},
      {ToolCallFormat::hermes, "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>"},
      {ToolCallFormat::hermes, "<tool_call>{\"arguments\": {}}</tool_call> tail"},
      {ToolCallFormat::hermes, "<tool_call>{\"name\": \"search\\"},
      {ToolCallFormat::hermes, "<tool_"},
      {ToolCallFormat::llama3_json, "{\"answer\": 42, \"name\": \"Bob\"}"},
      {ToolCallFormat::llama3_json, "  {\"name\": \"Bob\"} and more"},
      {ToolCallFormat::llama3_json, "{not json"},
      {ToolCallFormat::mistral, "[1, 2, 3] and [TOOL_CALLS]x"},
      {ToolCallFormat::mistral, "[{\"a\": 1}]"},
      {ToolCallFormat::mistral, "["},
      {ToolCallFormat::none, "<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>"},
  };
  for (const auto& [f, text] : cases) {
    const ParsedToolCalls p = parse(f, text);
    EXPECT_TRUE(p.calls.empty()) << text << " -> " << describe(p);
    EXPECT_EQ(p.content, text);
    expect_chunking_invariant(f, text);
  }
  // No tools in the request: nothing is a call.
  const ParsedToolCalls none =
      parse_tool_calls({ToolCallFormat::llama3_json, {}}, "{\"name\": \"search\"}");
  EXPECT_TRUE(none.calls.empty());
}

TEST(ToolCallParse, ACallCutShortKeepsWhatItHas) {
  // Bad JSON inside the arguments, after the name: the call stands, the rest is content.
  ParsedToolCalls p = parse(ToolCallFormat::hermes,
                            "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": tru!} ok");
  ASSERT_EQ(p.calls.size(), 1u) << describe(p);
  EXPECT_EQ(p.calls[0].arguments, "{\"q\": tru");
  EXPECT_EQ(p.content, "!} ok");
  // The text ends inside the call (max_tokens).
  p = parse(ToolCallFormat::hermes, "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": [1,");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{\"q\": [1,");
  // Cut before any arguments were written: none, not a "{}" the model never wrote (which
  // would also pass for a complete call that breaks a schema with required properties).
  p = parse(ToolCallFormat::hermes, "<tool_call>{\"name\": \"search\"");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "");
  p = parse(ToolCallFormat::hermes, "<tool_call>{\"name\": \"search\", \"arguments\":");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "");
  // A missing closing tag still ends the call; the next call is found.
  p = parse(ToolCallFormat::hermes,
            "<tool_call>{\"name\": \"search\"}\n<tool_call>{\"name\": \"get_weather\"}");
  EXPECT_EQ(p.calls.size(), 2u) << describe(p);
  EXPECT_EQ(p.content, "");
}

TEST(ToolCallStream, NameFirstThenArgumentsAsTheyArrive) {
  ToolCallParser p(setup(ToolCallFormat::hermes));
  auto d = p.feed("Hi <tool_call>{\"name\": \"get_wea");
  ASSERT_EQ(d.size(), 1u);  // the call is held until its name is known
  EXPECT_EQ(d[0].kind, ToolCallDelta::Kind::content);
  EXPECT_EQ(d[0].text, "Hi");
  d = p.feed("ther\", \"arguments\": {\"ci");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, ToolCallDelta::Kind::call);
  EXPECT_EQ(d[0].index, 0);
  EXPECT_EQ(d[0].text, "get_weather");
  EXPECT_EQ(d[1].kind, ToolCallDelta::Kind::arguments);
  EXPECT_EQ(d[1].text, "{\"ci");
  d = p.feed("ty\": \"Paris\"}}</tool_call>");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "ty\": \"Paris\"}");
  EXPECT_TRUE(p.finish().empty());
  EXPECT_EQ(p.calls(), 1);
}

TEST(ToolCallStream, RandomTextsAgreeUnderEveryChunking) {
  // Fragments of every syntax glued at random: whatever they make, chunking cannot change it.
  const std::vector<std::string> parts = {"<tool_call>",
                                          "</tool_call>",
                                          "{\"name\": \"search\"",
                                          ", \"arguments\": ",
                                          "{\"q\": [1, {}]}",
                                          "}",
                                          "\n",
                                          " ",
                                          "[TOOL_CALLS]",
                                          "[",
                                          "]",
                                          ",",
                                          ";",
                                          "<|python_tag|>",
                                          "\"",
                                          "x",
                                          "-0.5e+3",
                                          "{",
                                          "\\\"",
                                          "<tool",
                                          "{\"name\": \"get_weather\", \"arguments\": {\"a\": 1}}",
                                          "<tool_call>{\"name\": \"search\"}</tool_call>",
                                          "[TOOL_CALLS][{\"name\": \"search\"}]"};
  std::mt19937 rng(11);
  int with_calls = 0;
  for (ToolCallFormat f :
       {ToolCallFormat::hermes, ToolCallFormat::llama3_json, ToolCallFormat::mistral}) {
    for (int n = 0; n < 150; ++n) {
      std::string text;
      const int len = 1 + static_cast<int>(rng() % 12);
      for (int i = 0; i < len; ++i) text += parts[rng() % parts.size()];
      const ParsedToolCalls p = parse(f, text);
      if (p.calls.empty()) {
        EXPECT_EQ(p.content, text);
      }
      ToolCallParser bytewise(setup(f));
      ParsedToolCalls q;
      for (char c : text) q.add(bytewise.feed(std::string_view(&c, 1)));
      q.add(bytewise.finish());
      EXPECT_EQ(describe(q), describe(p)) << text;
      with_calls += p.calls.empty() ? 0 : 1;
    }
  }
  EXPECT_GT(with_calls, 40);  // the fragments do make calls
}

TEST(ToolCallFormatChoice, DetectedFromTheRealTemplates) {
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string dir = std::string(LIFT_SOURCE_DIR) + "/tests/template/templates/";
  EXPECT_EQ(detect_tool_call_format(read(dir + "llama3.1-tools.jinja")),
            ToolCallFormat::llama3_json);
  EXPECT_EQ(detect_tool_call_format(read(dir + "mistral-v0.3-tools.jinja")),
            ToolCallFormat::mistral);
  EXPECT_EQ(detect_tool_call_format(read(dir + "qwen2.5-tools.jinja")), ToolCallFormat::hermes);
  const auto qwen3 = nlohmann::json::parse(
      read(test::model_path("tokenizers/qwen3/tokenizer_config.json")))["chat_template"];
  EXPECT_EQ(detect_tool_call_format(qwen3.get<std::string>()), ToolCallFormat::hermes);

  EXPECT_EQ(parse_tool_call_format("mistral"), ToolCallFormat::mistral);
  EXPECT_EQ(tool_call_format_name(ToolCallFormat::llama3_json), "llama3_json");
  EXPECT_THROW((void)parse_tool_call_format("gpt"), Error);

  const std::string id = new_tool_call_id(ToolCallFormat::mistral);
  EXPECT_EQ(id.size(), 9u);
  EXPECT_TRUE(std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(c); }));
  EXPECT_TRUE(new_tool_call_id(ToolCallFormat::hermes).starts_with("call_"));
  EXPECT_NE(new_tool_call_id(ToolCallFormat::hermes), new_tool_call_id(ToolCallFormat::hermes));
}

// The scanner against nlohmann's parser on valid and broken JSON.
TEST(ToolCallJsonScanner, AgreesWithAJsonParser) {
  const std::vector<std::string> texts = {
      "{}",
      "[]",
      "{\"a\": [1, -2, 3.5, 1e9, -0.0E-1, true, false, null, \"\\u00e9\\n\"]}",
      "\"str\"",
      "[[[]]]",
      "{\"a\":{\"b\":{}}}",
      "{,}",
      "[1,]",
      "{\"a\" 1}",
      "01",
      "1.",
      "-",
      "tru",
      "nul",
      "\"\\x\"",
      "[1 2]",
      "{\"a\":1,}",
      "\"a\nb\"",
      "]",
      "{\"a\":1}}",
      "1e+",
      "[\"\\uZZZZ\"]"};
  for (const std::string& t : texts) {
    JsonScanner s;
    bool ok = true;
    size_t end = t.size();
    for (size_t i = 0; i < t.size() && ok; ++i) {
      const JsonScanner::Step st = s.push(t[i]);
      if (st == JsonScanner::Step::error) ok = false;
      if (st == JsonScanner::Step::done || st == JsonScanner::Step::ended_before) {
        end = st == JsonScanner::Step::done ? i + 1 : i;
        break;
      }
    }
    const bool whole = ok && end == t.size() && s.complete();
    EXPECT_EQ(whole, nlohmann::json::accept(t)) << t;
  }
}

}  // namespace
}  // namespace lift
