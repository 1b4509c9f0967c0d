// Choosing a model's chat template and turning a request's conversation into prompt tokens.
// What templates render is checked against Python's Jinja2 in tests/template; here: which
// template is picked, how the conversation reaches it, and how its text is tokenized.
#include "server/chat_template.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace lift {
namespace {

using json = nlohmann::ordered_json;

ChatInput conversation(bool gen = true) {
  ChatInput in;
  in.messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                             {{"role", "user"}, {"content", "What is 2+2?"}}});
  in.add_generation_prompt = gen;
  return in;
}

gguf::File vocab(const std::string& name) {
  return gguf::File::open(test::model_path("vocab/ggml-vocab-" + name + ".gguf"));
}

// A metadata-only GGUF whose tokenizer.chat_template is `tmpl` (a u32 when tmpl is empty).
gguf::File with_template(const std::string& tmpl, std::vector<uint8_t>& bytes) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  if (tmpl.empty()) {
    w.set_u32("tokenizer.chat_template", 7);
  } else {
    w.set_string("tokenizer.chat_template", tmpl);
  }
  bytes = w.to_bytes();
  return gguf::File::parse(bytes);
}

TEST(ChatTemplateChoice, ModelsOwnTemplateIsRenderedAsWritten) {
  const gguf::File f = vocab("phi-3");
  const ChosenTemplate c = choose_chat_template(f, "");
  EXPECT_EQ(c.tmpl.source(), std::string(*f.get_string("tokenizer.chat_template")));
  EXPECT_NE(c.note.find("the model's own"), std::string::npos) << c.note;
  // Phi-3's vocabulary template: BOS, user turns with the assistant header after each.
  EXPECT_EQ(c.tmpl.render(conversation(), "<s>", "<|endoftext|>"),
            "<s><|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n");
  EXPECT_EQ(c.tmpl.end_markers(), std::vector<std::string>{"<|end|>"});
}

TEST(ChatTemplateChoice, NoTemplateMeansChatml) {
  const gguf::File f = gguf::File::open(test::model_path("stories260K/stories260K.gguf"));
  ASSERT_FALSE(f.get_string("tokenizer.chat_template"));
  const ChosenTemplate c = choose_chat_template(f, "");
  EXPECT_EQ(c.tmpl.source(), ChatTemplate(ChatFormat::chatml).source());
  EXPECT_NE(c.note.find("no tokenizer.chat_template"), std::string::npos) << c.note;
  EXPECT_EQ(c.tmpl.render(conversation(), "<s>", "</s>"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateChoice, OverrideByNameFileOrInline) {
  const gguf::File f = vocab("phi-3");
  const ChosenTemplate by_name = choose_chat_template(f, "Llama3");
  EXPECT_EQ(by_name.tmpl.source(), ChatTemplate(ChatFormat::llama3).source());
  EXPECT_EQ(by_name.tmpl.render(conversation(false), "<B>", "<E>"),
            "<B><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>");

  const std::string inline_src =
      "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}";
  EXPECT_EQ(choose_chat_template(f, inline_src).tmpl.render(conversation(), "", ""),
            "[system:Be brief.][user:What is 2+2?]");

  const std::string path = testing::TempDir() + "lift_chat_template.jinja";
  std::ofstream(path) << "{{ messages | length }}{{ bos_token }}\n";
  const ChosenTemplate from_file = choose_chat_template(f, path);
  EXPECT_EQ(from_file.tmpl.render(conversation(), "<s>", ""), "2<s>");
  EXPECT_NE(from_file.note.find(path), std::string::npos);
  std::remove(path.c_str());

  try {
    (void)choose_chat_template(f, "no-such-template");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chatml"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplateChoice, UnparsableTemplatesFailAtStartWithTheLine) {
  std::vector<uint8_t> bytes;
  const gguf::File f = with_template("line one\n{% for m in messages %}{{ m.content }}", bytes);
  try {
    (void)choose_chat_template(f, "");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tokenizer.chat_template"), std::string::npos) << what;
    EXPECT_NE(what.find("endfor"), std::string::npos) << what;
  }
  EXPECT_THROW((void)choose_chat_template(f, "{{ x | no_such_filter }}"), Error);
  std::vector<uint8_t> bytes2;
  const gguf::File u32 = with_template("", bytes2);
  EXPECT_THROW((void)choose_chat_template(u32, ""), Error);
  EXPECT_NO_THROW((void)choose_chat_template(u32, "chatml"));  // an override needs no key
}

TEST(ChatTemplateRender, RaiseExceptionIsARefusalWithTheTemplatesMessage) {
  const ChosenTemplate gemma = choose_chat_template(vocab("gemma3"), "");
  ChatInput in;
  in.messages =
      json::array({{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}});
  try {
    (void)gemma.tmpl.render(in, "<bos>", "<eos>");
    ADD_FAILURE() << "expected a refusal";
  } catch (const ChatTemplateRefused& e) {
    EXPECT_EQ(std::string(e.what()),
              "Conversation roles must alternate user/assistant/user/assistant/...");
  }
  // A template that fails on the data (string + None) is an error, not a refusal.
  in.messages = json::array({{{"role", "user"}, {"content", nullptr}}});
  const ChatTemplate adds("{{ 'x' + messages[0]['content'] }}", "adding");
  EXPECT_THROW((void)adds.render(in, "", ""), Error);
  try {
    (void)adds.render(in, "", "");
  } catch (const ChatTemplateRefused&) {
    ADD_FAILURE() << "a type error is not raise_exception";
  } catch (const Error&) {
  }
}

TEST(ChatTemplateRender, ToolsAndKwargsReachTheTemplate) {
  const ChosenTemplate qwen = choose_chat_template(vocab("qwen2"), "");
  ChatInput in = conversation();
  in.tools = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}}}}});
  const std::string with_tools = qwen.tmpl.render(in, "", "<|im_end|>");
  EXPECT_NE(with_tools.find("# Tools"), std::string::npos);
  EXPECT_NE(with_tools.find(R"({"type": "function", "function": {"name": "get_weather"}})"),
            std::string::npos)
      << with_tools;
  in.tools = nullptr;
  in.kwargs = {{"enable_thinking", false}};
  const std::string no_think = qwen.tmpl.render(in, "", "<|im_end|>");
  EXPECT_TRUE(no_think.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << no_think;
  in.kwargs = {{"messages", json::array()}};
  EXPECT_THROW((void)qwen.tmpl.render(in, "", ""), Error);
}

TEST(ChatTemplateRender, PromptTokensCarryTheTemplatesSpecialTokens) {
  const gguf::File f = vocab("qwen2");
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const ChosenTemplate qwen = choose_chat_template(f, "");
  const ChatPrompt p = build_chat_prompt(tok, qwen.tmpl, conversation());
  EXPECT_EQ(p.text, render_chat_prompt(tok, qwen.tmpl, conversation()));
  EXPECT_EQ(p.tokens, tok.encode(p.text, false, true));
  const auto im_start = tok.encode("<|im_start|>", false, true);
  ASSERT_EQ(im_start.size(), 1u);
  EXPECT_EQ(p.tokens.front(), im_start[0]);  // no BOS added in front of the template's text
  const auto im_end = tok.encode("<|im_end|>", false, true);
  ASSERT_EQ(im_end.size(), 1u);
  EXPECT_EQ(p.stop_token_ids, std::vector<int32_t>{im_end[0]});
  EXPECT_TRUE(p.stop.empty());

  // stories260K has no <|im_end|> token: its builtin chatml stops on the text instead.
  const gguf::File s = gguf::File::open(test::model_path("stories260K/stories260K.gguf"));
  const Tokenizer st = Tokenizer::from_gguf(s);
  const ChatPrompt q = build_chat_prompt(st, choose_chat_template(s, "").tmpl, conversation());
  EXPECT_TRUE(q.stop_token_ids.empty());
  EXPECT_EQ(q.stop, std::vector<std::string>{"<|im_end|>"});
}

TEST(ChatTemplateNames, BuiltinNamesRoundTrip) {
  for (ChatFormat f : all_chat_formats()) {
    EXPECT_EQ(parse_chat_format(chat_format_name(f)), f);
    EXPECT_NO_THROW(ChatTemplate{f});
  }
  EXPECT_EQ(parse_chat_format("ChatML"), ChatFormat::chatml);
  EXPECT_THROW(parse_chat_format("chatgpt"), Error);
}

}  // namespace
}  // namespace lift
