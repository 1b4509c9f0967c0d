// What a chat request hands its template: messages (content parts joined, tool calls with
// parsed arguments, keys in the client's order), tools, add_generation_prompt and
// chat_template_kwargs; template refusals as 400s; /tokenize and /apply-template on messages.
#include <gtest/gtest.h>

#include <string>

#include "server/openai_request.h"
#include "test_paths.h"

namespace lift {
namespace {

const Tokenizer& stories() {
  static const Tokenizer t = Tokenizer::load(test::model_path("stories260K/stories260K.gguf"));
  return t;
}

// A template that prints exactly what it was given.
const ChatTemplate& echo() {
  static const ChatTemplate t(
      "{{ messages | tojson }}|{{ tools | tojson }}|{{ add_generation_prompt }}|"
      "{{ enable_thinking is defined and enable_thinking }}",
      "the echo template");
  return t;
}

ApiContext context(const ChatTemplate& t) { return ApiContext{stories(), t, 2048, 512}; }

std::string seen(const std::string& body) {
  return render_chat_text(context(echo()), parse_chat_input(body));
}

TEST(ChatRequestInput, TheTemplateSeesTheConversationAsSent) {
  EXPECT_EQ(seen(R"({"messages": [{"role": "user", "content": "Hi", "name": "ann"}]})"),
            R"([{"role": "user", "content": "Hi", "name": "ann"}]|null|True|False)");
  // Keys keep the client's order (Python's dicts do; tojson shows it).
  EXPECT_EQ(seen(R"({"messages": [{"content": "x", "role": "user"}], "add_generation_prompt": false,
                     "tools": [{"type": "function", "function": {"name": "f", "description": "d"}}],
                     "chat_template_kwargs": {"enable_thinking": true}})"),
            R"([{"content": "x", "role": "user"}]|[{"type": "function", "function": {"name": "f", )"
            R"("description": "d"}}]|False|True)");
  // Text parts are joined; a tool-calling turn without content gets "" (as vLLM); arguments
  // sent as a JSON string become an object.
  EXPECT_EQ(
      seen(R"({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
          "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [true]}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]})"),
      R"([{"role": "user", "content": "ab"}, {"role": "assistant", "tool_calls": [{"id": "c1", )"
      R"("type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": [true]}}}], )"
      R"("content": ""}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]|null|True|False)");
  EXPECT_EQ(seen(R"({"messages": [{"role": "user", "content": null}]})"),
            R"([{"role": "user", "content": ""}]|null|True|False)");
  // Arguments that are not a JSON object stay the string they were.
  EXPECT_NE(seen(R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [
                     {"function": {"name": "f", "arguments": "not json"}}]}]})")
                .find(R"("arguments": "not json")"),
            std::string::npos);
}

ApiError error_of(const std::string& body, const ChatTemplate& t) {
  try {
    (void)parse_chat_request(body, context(t));
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(200, "");
}

TEST(ChatRequestInput, BadFieldsAndRefusalsAre400s) {
  const ChatTemplate refuse("{{ raise_exception('only ' ~ messages | length ~ ' message') }}",
                            "refusing");
  ApiError e = error_of(R"({"messages": [{"role": "user", "content": "x"}]})", refuse);
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "messages");
  EXPECT_STREQ(e.what(), "only 1 message");
  e = error_of(R"({"messages": [{"role": "wizard", "content": "x"}]})", echo());
  EXPECT_EQ(e.param(), "messages[0].role");
  EXPECT_EQ(seen(R"({"messages": [{"role": "developer", "content": "x"}]})"),
            R"([{"role": "system", "content": "x"}]|null|True|False)");
  e = error_of(R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", echo());
  EXPECT_EQ(e.param(), "tools");
  e = error_of(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": 1})",
               echo());
  EXPECT_EQ(e.param(), "chat_template_kwargs");
  e = error_of(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
               echo());
  EXPECT_EQ(e.param(), "tool_choice");
  e = error_of(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]})",
               echo());
  EXPECT_EQ(e.param(), "messages[0].tool_calls[0].function.name");
  e = error_of(R"({"messages": [{"role": "user", "content": "x"}],
                   "chat_template_kwargs": {"messages": []}})",
               echo());
  EXPECT_NE(std::string(e.what()).find("may not set 'messages'"), std::string::npos) << e.what();
  // A template error on the data (str + int) is a 400 too, not a crash or a 500.
  const ChatTemplate adds("{{ messages[0]['content'] + 1 }}", "adding");
  e = error_of(R"({"messages": [{"role": "user", "content": "x"}]})", adds);
  EXPECT_EQ(e.status(), 400);
  // The OpenAI tool round trip (the SDK's assistant turn has content null) renders with the
  // built-in ChatML, its calls written as the hermes parser reads them.
  const std::string round_trip =
      render_chat_text(context(ChatFormat::chatml), parse_chat_input(R"({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
          "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "r"}]})"));
  EXPECT_NE(
      round_trip.find("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"),
      std::string::npos)
      << round_trip;
  EXPECT_NE(round_trip.find("<tool_response>\nr\n</tool_response>"), std::string::npos)
      << round_trip;
}

// continue_final_message (vLLM's): the prompt stops right after the last assistant text, so
// the model goes on with it; with add_generation_prompt also true it is a 400, as in vLLM.
TEST(ChatRequestInput, ContinueFinalMessageEndsInsideTheLastTurn) {
  const std::string text = render_chat_text(
      context(ChatFormat::chatml),
      parse_chat_input(R"({"messages": [{"role": "user", "content": "Tell a story"},
          {"role": "assistant", "content": "Once upon "}], "add_generation_prompt": false,
          "continue_final_message": true})"));
  // ChatML keeps the text as written, trailing space included.
  EXPECT_EQ(text, "<|im_start|>user\nTell a story<|im_end|>\n<|im_start|>assistant\nOnce upon ");
  auto continued = [](const ChatTemplate& t, const std::string& last) {
    nlohmann::ordered_json body = {
        {"messages",
         {{{"role", "user"}, {"content", "x"}}, {{"role", "assistant"}, {"content", last}}}},
        {"add_generation_prompt", false},
        {"continue_final_message", true}};
    return render_chat_text(context(t), parse_chat_input(body.dump()));
  };
  // Text that also spells part of the closing markup ("end" in <|im_end|>), and no text.
  EXPECT_EQ(continued(ChatFormat::chatml, "end"),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\nend");
  EXPECT_EQ(continued(ChatFormat::chatml, ""),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
  // A template that trims the text drops its trailing space here too.
  const ChatTemplate trims("{% for m in messages %}[{{ m['content'] | trim }}]{% endfor %}",
                           "trimming");
  EXPECT_EQ(continued(trims, " Once upon "), "[x][Once upon");
  ApiError e = error_of(R"({"messages": [{"role": "assistant", "content": "x"}],
                            "continue_final_message": true})",
                        echo());
  EXPECT_EQ(e.param(), "continue_final_message");
  e = error_of(R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": false,
                   "continue_final_message": true})",
               ChatTemplate("{{ messages | length }}", "dropping"));
  EXPECT_NE(std::string(e.what()).find("does not write the last message"), std::string::npos)
      << e.what();
  e = error_of(R"({"messages": [{"role": "user", "content": "x"}], "chat_template": "{{ 1 }}"})",
               echo());
  EXPECT_EQ(e.param(), "chat_template");
}

TEST(ChatRequestTokenize, MessagesAreRenderedThenTokenized) {
  const ApiContext ctx = context(ChatFormat::llama3);
  const std::string body = R"({"messages": [{"role": "user", "content": "Hi"}]})";
  const std::string text = render_chat_text(ctx, parse_chat_input(body));
  EXPECT_EQ(text,
            "<s><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const TokenizeRequest t = parse_tokenize_request(body);
  ASSERT_TRUE(t.chat.has_value());
  EXPECT_FALSE(t.add_special);  // vLLM's default for messages: the template writes BOS
  const auto ids = tokenize(ctx, t);
  EXPECT_EQ(ids, stories().encode(text, false, true));
  EXPECT_EQ(ids.front(), stories().vocab().bos_id());  // the template's own <s>
  const TokenizeRequest with = parse_tokenize_request(
      R"({"messages": [{"role": "user", "content": "Hi"}], "add_special_tokens": true})");
  const auto ids2 = tokenize(ctx, with);
  ASSERT_EQ(ids2.size(), ids.size() + 1);  // stories260K adds BOS: now doubled, as asked
  EXPECT_EQ(ids2[0], stories().vocab().bos_id());
  // A prompt tokenizes as before.
  EXPECT_EQ(tokenize(ctx, parse_tokenize_request(R"({"prompt": "Once upon a time"})")),
            (std::vector<int32_t>{1, 403, 407, 261, 378}));
}

}  // namespace
}  // namespace lift
