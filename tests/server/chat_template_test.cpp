#include "server/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "util/error.h"

namespace lift {
namespace {

std::string hf_chat_template(const std::string& rel) {
  std::ifstream in(test::model_path(rel));
  EXPECT_TRUE(in.good()) << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str());
  return j.at("chat_template").get<std::string>();
}

// The conversation every golden string below renders.
std::vector<ChatMessage> conversation() {
  return {
      {"system", "You are a terse assistant."},
      {"user", "What is 2+2?"},
      {"assistant", "4."},
      {"user", "And 3+3?"},
  };
}

std::string render(ChatFormat f, const std::vector<ChatMessage>& m, bool gen = true) {
  return render_chat(f, m, gen, "<s>", "</s>");
}

// Expects render_chat to throw a lift::Error whose message contains `needle`.
void expect_error(ChatFormat f, const std::vector<ChatMessage>& m, const std::string& needle) {
  try {
    (void)render(f, m);
    ADD_FAILURE() << chat_format_name(f) << ": no error, expected one containing '" << needle
                  << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << chat_format_name(f) << ": " << e.what();
  }
}

// ---- Detection ---------------------------------------------------------------------------------

TEST(ChatTemplateDetect, RealLlama3Template) {
  const std::string t = hf_chat_template("tokenizers/llama3/tokenizer_config.json");
  ASSERT_NE(t.find("<|eot_id|>"), std::string::npos);
  EXPECT_EQ(detect_chat_format(t), ChatFormat::llama3);
}

TEST(ChatTemplateDetect, RealQwen3Template) {
  const std::string t = hf_chat_template("tokenizers/qwen3/tokenizer_config.json");
  ASSERT_NE(t.find("<tool_call>"), std::string::npos);  // the tool-call parts don't confuse it
  EXPECT_EQ(detect_chat_format(t), ChatFormat::chatml);
}

TEST(ChatTemplateDetect, RealPhi3TemplateFromGguf) {
  const auto file = gguf::File::open(test::model_path("vocab/ggml-vocab-phi-3.gguf"));
  const ChatTemplate ct = choose_chat_template(file, std::nullopt);
  EXPECT_EQ(ct.format, ChatFormat::phi3);
  EXPECT_TRUE(ct.from_model);
  EXPECT_NE(ct.note.find("phi3"), std::string::npos) << ct.note;
}

// Representative templates written from each format's description.
TEST(ChatTemplateDetect, HandWrittenTemplates) {
  const std::string llama2 =
      "{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}"
      "{% set msgs = messages[1:] %}{% else %}{% set sys = false %}{% set msgs = messages %}"
      "{% endif %}{% for m in msgs %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('roles must alternate') }}{% endif %}"
      "{% if loop.index0 == 0 and sys != false %}"
      "{% set text = '<<SYS>>\\n' + sys + '\\n<</SYS>>\\n\\n' + m['content'] %}"
      "{% else %}{% set text = m['content'] %}{% endif %}"
      "{% if m['role'] == 'user' %}{{ bos_token + '[INST] ' + text | trim + ' [/INST]' }}"
      "{% else %}{{ ' ' + text | trim + ' ' + eos_token }}{% endif %}{% endfor %}";
  const std::string mistral =
      "{%- if messages[0]['role'] == 'system' %}{%- set sys = messages[0]['content'] %}"
      "{%- set msgs = messages[1:] %}{%- else %}{%- set msgs = messages %}{%- endif %}"
      "{{- bos_token }}{%- for m in msgs %}"
      "{%- if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{- raise_exception('roles must alternate user/assistant') }}{%- endif %}"
      "{%- if m['role'] == 'user' %}{%- if loop.first and sys is defined %}"
      "{{- ' [INST] ' + sys + '\\n\\n' + m['content'] + ' [/INST]' }}{%- else %}"
      "{{- ' [INST] ' + m['content'] + ' [/INST]' }}{%- endif %}"
      "{%- else %}{{- ' ' + m['content'] + eos_token }}{%- endif %}{%- endfor %}";
  const std::string gemma =
      "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'assistant' %}"
      "{% set role = 'model' %}{% else %}{% set role = m['role'] %}{% endif %}"
      "{{ '<start_of_turn>' + role + '\\n' + m['content'] | trim + '<end_of_turn>\\n' }}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";
  const std::string zephyr =
      "{% for m in messages %}\n{% if m['role'] == 'user' %}\n"
      "{{ '<|user|>\\n' + m['content'] + eos_token }}\n{% elif m['role'] == 'system' %}\n"
      "{{ '<|system|>\\n' + m['content'] + eos_token }}\n{% elif m['role'] == 'assistant' %}\n"
      "{{ '<|assistant|>\\n' + m['content'] + eos_token }}\n{% endif %}\n"
      "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
      "{% endfor %}";
  const std::string phi3 =
      "{% for m in messages %}{% if m['role'] == 'system' and m['content'] %}"
      "{{ '<|system|>\\n' + m['content'] + '<|end|>\\n' }}{% elif m['role'] == 'user' %}"
      "{{ '<|user|>\\n' + m['content'] + '<|end|>\\n' }}{% elif m['role'] == 'assistant' %}"
      "{{ '<|assistant|>\\n' + m['content'] + '<|end|>\\n' }}{% endif %}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";
  const std::string chatml =
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
      "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const std::string llama3 =
      "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
      "'<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
      "{% endif %}";

  EXPECT_EQ(detect_chat_format(llama2), ChatFormat::llama2);
  EXPECT_EQ(detect_chat_format(mistral), ChatFormat::mistral);
  EXPECT_EQ(detect_chat_format(gemma), ChatFormat::gemma);
  EXPECT_EQ(detect_chat_format(zephyr), ChatFormat::zephyr);
  EXPECT_EQ(detect_chat_format(phi3), ChatFormat::phi3);
  EXPECT_EQ(detect_chat_format(chatml), ChatFormat::chatml);
  EXPECT_EQ(detect_chat_format(llama3), ChatFormat::llama3);
}

TEST(ChatTemplateDetect, UnknownAndLookalikes) {
  EXPECT_EQ(detect_chat_format(""), std::nullopt);
  EXPECT_EQ(detect_chat_format("{% for m in messages %}{{ m['role'] + ': ' + m['content'] + "
                               "'\\n' }}{% endfor %}{{ 'assistant:' }}"),
            std::nullopt);
  // A DeepSeek-style template (full-width bars) is none of ours.
  EXPECT_EQ(detect_chat_format("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
                               "{{ '<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + m['content'] }}{% endif %}"
                               "{% endfor %}"),
            std::nullopt);
  // Phi-4 uses ChatML tokens with a different header layout.
  EXPECT_EQ(detect_chat_format("{{ '<|im_start|>' + m['role'] + '<|im_sep|>' + m['content'] + "
                               "'<|im_end|>' }}"),
            std::nullopt);
  // GLM templates have <|user|>/<|assistant|> but are not zephyr.
  EXPECT_EQ(detect_chat_format("[gMASK]<sop>{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' "
                               "+ m['content'] }}{% endfor %}{{ '<|assistant|>' }}<|user|>"),
            std::nullopt);
  // <|user|> without an end-of-turn marker is ambiguous: not guessed.
  EXPECT_EQ(detect_chat_format("{{ '<|user|>\\n' + c }}{{ '<|assistant|>\\n' }}"), std::nullopt);
  // <|endoftext|> and <|end_header_id|> are not <|end|>.
  EXPECT_EQ(detect_chat_format("{{ '<|user|>\\n' + c + '<|endoftext|>' }}{{ '<|assistant|>' }}"),
            std::nullopt);
}

// ---- Rendering: golden strings written from each format's official layout ----------------------

TEST(ChatTemplateRender, ChatML) {
  EXPECT_EQ(render(ChatFormat::chatml, conversation()),
            "<|im_start|>system\nYou are a terse assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4.<|im_end|>\n"
            "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateRender, Llama2) {
  EXPECT_EQ(render(ChatFormat::llama2, conversation()),
            "<s>[INST] <<SYS>>\nYou are a terse assistant.\n<</SYS>>\n\nWhat is 2+2? [/INST]"
            " 4. </s>"
            "<s>[INST] And 3+3? [/INST]");
}

TEST(ChatTemplateRender, Llama3) {
  EXPECT_EQ(
      render_chat(ChatFormat::llama3, conversation(), true, "<|begin_of_text|>", "<|end_of_text|>"),
      "<|begin_of_text|>"
      "<|start_header_id|>system<|end_header_id|>\n\nYou are a terse assistant.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n4.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateRender, Mistral) {
  EXPECT_EQ(render(ChatFormat::mistral, conversation()),
            "<s> [INST] You are a terse assistant.\n\nWhat is 2+2? [/INST] 4.</s>"
            " [INST] And 3+3? [/INST]");
}

TEST(ChatTemplateRender, Gemma) {
  EXPECT_EQ(render_chat(ChatFormat::gemma, conversation(), true, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nYou are a terse assistant.\n\nWhat is 2+2?<end_of_turn>\n"
            "<start_of_turn>model\n4.<end_of_turn>\n"
            "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplateRender, Zephyr) {
  EXPECT_EQ(render(ChatFormat::zephyr, conversation()),
            "<|system|>\nYou are a terse assistant.</s>\n"
            "<|user|>\nWhat is 2+2?</s>\n"
            "<|assistant|>\n4.</s>\n"
            "<|user|>\nAnd 3+3?</s>\n"
            "<|assistant|>\n");
}

TEST(ChatTemplateRender, Phi3) {
  EXPECT_EQ(render_chat(ChatFormat::phi3, conversation(), true, "<s>", "<|endoftext|>"),
            "<|system|>\nYou are a terse assistant.<|end|>\n"
            "<|user|>\nWhat is 2+2?<|end|>\n"
            "<|assistant|>\n4.<|end|>\n"
            "<|user|>\nAnd 3+3?<|end|>\n"
            "<|assistant|>\n");
}

TEST(ChatTemplateRender, WithoutGenerationPrompt) {
  const std::vector<ChatMessage> m = {{"user", "Hi"}, {"assistant", "Hello"}};
  EXPECT_EQ(render(ChatFormat::chatml, m, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n");
  EXPECT_EQ(render(ChatFormat::gemma, m, false),
            "<s><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n");
  EXPECT_EQ(render(ChatFormat::llama2, m, false), "<s>[INST] Hi [/INST] Hello </s>");
  EXPECT_EQ(render(ChatFormat::mistral, m, false), "<s> [INST] Hi [/INST] Hello</s>");
  // Phi-3.5's template ends a prompt without a generation header with EOS.
  EXPECT_EQ(render_chat(ChatFormat::phi3, m, false, "<s>", "<|endoftext|>"),
            "<|user|>\nHi<|end|>\n<|assistant|>\nHello<|end|>\n<|endoftext|>");
}

TEST(ChatTemplateRender, NoSystemMessage) {
  const std::vector<ChatMessage> m = {{"user", "Hi"}};
  EXPECT_EQ(render(ChatFormat::llama2, m), "<s>[INST] Hi [/INST]");
  EXPECT_EQ(render(ChatFormat::mistral, m), "<s> [INST] Hi [/INST]");
  EXPECT_EQ(render(ChatFormat::gemma, m),
            "<s><start_of_turn>user\nHi<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(render(ChatFormat::llama3, m),
            "<s><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Formats whose templates trim contents (Jinja's trim / strip) do; the others keep whitespace.
TEST(ChatTemplateRender, TrimsWhereTheTemplateDoes) {
  const std::vector<ChatMessage> m = {{"system", " Be brief. "}, {"user", "\n Hi \t\n"}};
  EXPECT_EQ(render(ChatFormat::llama3, m),
            "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // llama2 strips the whole first-turn text, so the system message keeps its inner spaces.
  EXPECT_EQ(render(ChatFormat::llama2, m),
            "<s>[INST] <<SYS>>\n Be brief. \n<</SYS>>\n\n\n Hi [/INST]");
  // gemma trims the user text but not the system prefix in front of it.
  EXPECT_EQ(render(ChatFormat::gemma, m),
            "<s><start_of_turn>user\n Be brief. \n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render(ChatFormat::chatml, m),
            "<|im_start|>system\n Be brief. <|im_end|>\n<|im_start|>user\n\n Hi \t\n<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(ChatFormat::mistral, m), "<s> [INST]  Be brief. \n\n\n Hi \t\n [/INST]");
}

TEST(ChatTemplateRender, DeveloperRoleIsSystem) {
  const std::vector<ChatMessage> dev = {{"developer", "Rules."}, {"user", "Hi"}};
  const std::vector<ChatMessage> sys = {{"system", "Rules."}, {"user", "Hi"}};
  for (ChatFormat f : all_chat_formats()) {
    EXPECT_EQ(render(f, dev), render(f, sys)) << chat_format_name(f);
  }
}

TEST(ChatTemplateRender, BosOnlyWhereTheTemplateHasIt) {
  const std::vector<ChatMessage> m = {{"user", "Hi"}};
  for (ChatFormat f : all_chat_formats()) {
    const std::string out = render_chat(f, m, true, "<BOS>", "<EOS>");
    EXPECT_EQ(out.rfind("<BOS>", 0) == 0, renders_bos(f)) << chat_format_name(f) << ": " << out;
  }
}

TEST(ChatTemplateRender, ChatMLAndFriendsAllowSystemAnywhere) {
  const std::vector<ChatMessage> m = {{"user", "Hi"}, {"system", "Now be formal."}, {"user", "Hi"}};
  EXPECT_EQ(render(ChatFormat::chatml, m),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nNow be formal.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_NO_THROW(render(ChatFormat::llama3, m));
  EXPECT_NO_THROW(render(ChatFormat::zephyr, m));
  EXPECT_NO_THROW(render(ChatFormat::phi3, m));
}

// ---- Errors
// --------------------------------------------------------------------------------------

TEST(ChatTemplateErrors, UnknownRoleIsNamed) {
  const std::vector<ChatMessage> m = {{"user", "Hi"}, {"tool", "42"}};
  for (ChatFormat f : all_chat_formats()) expect_error(f, m, "'tool'");
  expect_error(ChatFormat::chatml, {{"User", "Hi"}}, "'User'");
}

TEST(ChatTemplateErrors, NoMessages) {
  for (ChatFormat f : all_chat_formats()) expect_error(f, {}, "no messages");
}

TEST(ChatTemplateErrors, AlternationEnforcedWhereTheTemplateRaises) {
  const std::vector<ChatMessage> two_users = {{"user", "a"}, {"user", "b"}};
  const std::vector<ChatMessage> starts_with_assistant = {{"assistant", "a"}, {"user", "b"}};
  const std::vector<ChatMessage> two_assistants = {
      {"system", "s"}, {"user", "a"}, {"assistant", "b"}, {"assistant", "c"}};
  for (ChatFormat f : {ChatFormat::llama2, ChatFormat::mistral, ChatFormat::gemma}) {
    expect_error(f, two_users, "must alternate user/assistant");
    expect_error(f, two_users, "message 1 is user, expected assistant");
    expect_error(f, starts_with_assistant, "message 0 is assistant, expected user");
    expect_error(f, two_assistants, "message 3 is assistant, expected user");
    expect_error(f, {{"user", "a"}, {"assistant", "b"}, {"system", "c"}, {"user", "d"}},
                 "only one system message");
    expect_error(f, {{"system", "s"}}, "must be followed by a user message");
    // The error names the format.
    expect_error(f, two_users, std::string(chat_format_name(f)));
  }
  // Formats whose templates don't care render these as they are.
  for (ChatFormat f :
       {ChatFormat::chatml, ChatFormat::llama3, ChatFormat::zephyr, ChatFormat::phi3}) {
    EXPECT_NO_THROW(render(f, two_users)) << chat_format_name(f);
    EXPECT_NO_THROW(render(f, starts_with_assistant)) << chat_format_name(f);
  }
}

// ---- Names, stop strings ------------------------------------------------------------------------

TEST(ChatTemplateNames, ParseEveryNameAndRejectOthers) {
  for (ChatFormat f : all_chat_formats()) {
    EXPECT_EQ(parse_chat_format(chat_format_name(f)), f);
  }
  EXPECT_EQ(all_chat_formats().size(), 7u);
  EXPECT_EQ(parse_chat_format("ChatML"), ChatFormat::chatml);
  EXPECT_EQ(parse_chat_format("llama3"), ChatFormat::llama3);
  EXPECT_EQ(parse_chat_format("phi3"), ChatFormat::phi3);
  try {
    (void)parse_chat_format("vicuna");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'vicuna'"), std::string::npos) << msg;
    for (ChatFormat f : all_chat_formats()) {
      EXPECT_NE(msg.find(chat_format_name(f)), std::string::npos) << msg;
    }
  }
  EXPECT_THROW((void)parse_chat_format(""), Error);
}

TEST(ChatTemplateNames, StopStrings) {
  EXPECT_EQ(stop_strings(ChatFormat::chatml), std::vector<std::string>{"<|im_end|>"});
  EXPECT_EQ(stop_strings(ChatFormat::llama3), std::vector<std::string>{"<|eot_id|>"});
  EXPECT_EQ(stop_strings(ChatFormat::gemma), std::vector<std::string>{"<end_of_turn>"});
  EXPECT_EQ(stop_strings(ChatFormat::phi3), std::vector<std::string>{"<|end|>"});
  EXPECT_TRUE(stop_strings(ChatFormat::llama2).empty());
  EXPECT_TRUE(stop_strings(ChatFormat::mistral).empty());
  EXPECT_TRUE(stop_strings(ChatFormat::zephyr).empty());
}

// ---- choose_chat_template
// ------------------------------------------------------------------------

TEST(ChatTemplateChoose, Stories260KHasNoTemplateFallsBackToChatML) {
  const auto file = gguf::File::open(test::model_path("stories260K/stories260K.gguf"));
  ASSERT_FALSE(file.get_string("tokenizer.chat_template").has_value());
  const ChatTemplate ct = choose_chat_template(file, std::nullopt);
  EXPECT_EQ(ct.format, ChatFormat::chatml);
  EXPECT_FALSE(ct.from_model);
  EXPECT_NE(ct.note.find("no tokenizer.chat_template"), std::string::npos) << ct.note;
  EXPECT_NE(ct.note.find("chatml"), std::string::npos) << ct.note;
  EXPECT_NE(ct.note.find("--chat-template"), std::string::npos) << ct.note;
}

TEST(ChatTemplateChoose, ForcedWins) {
  const auto file = gguf::File::open(test::model_path("stories260K/stories260K.gguf"));
  const ChatTemplate ct = choose_chat_template(file, ChatFormat::gemma);
  EXPECT_EQ(ct.format, ChatFormat::gemma);
  EXPECT_FALSE(ct.from_model);
  EXPECT_NE(ct.note.find("gemma"), std::string::npos) << ct.note;

  const auto phi = gguf::File::open(test::model_path("vocab/ggml-vocab-phi-3.gguf"));
  EXPECT_EQ(choose_chat_template(phi, ChatFormat::llama2).format, ChatFormat::llama2);
}

TEST(ChatTemplateChoose, FromMetadata) {
  const std::string llama3 = hf_chat_template("tokenizers/llama3/tokenizer_config.json");
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.chat_template", llama3);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const auto file = gguf::File::parse(bytes);
  const ChatTemplate ct = choose_chat_template(file, std::nullopt);
  EXPECT_EQ(ct.format, ChatFormat::llama3);
  EXPECT_TRUE(ct.from_model);
  EXPECT_NE(ct.note.find("llama3"), std::string::npos) << ct.note;
}

TEST(ChatTemplateChoose, UnrecognizedTemplateFallsBack) {
  gguf::Writer w;
  w.set_string("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
  const std::vector<uint8_t> bytes = w.to_bytes();
  const auto file = gguf::File::parse(bytes);
  const ChatTemplate ct = choose_chat_template(file, std::nullopt);
  EXPECT_EQ(ct.format, ChatFormat::chatml);
  EXPECT_FALSE(ct.from_model);
  EXPECT_NE(ct.note.find("not one of the formats"), std::string::npos) << ct.note;
}

TEST(ChatTemplateChoose, NonStringTemplateFallsBack) {
  gguf::Writer w;
  w.set_u32("tokenizer.chat_template", 7);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const auto file = gguf::File::parse(bytes);
  const ChatTemplate ct = choose_chat_template(file, std::nullopt);
  EXPECT_EQ(ct.format, ChatFormat::chatml);
  EXPECT_FALSE(ct.from_model);
  EXPECT_NE(ct.note.find("not a string"), std::string::npos) << ct.note;
}

}  // namespace
}  // namespace lift
