// libFuzzer target for the chat-template interpreter. Two kinds of input, by the first
// byte's top bit:
//  * clear: a hostile conversation (fuzz_support.h's chat input: any roles, any bytes in the
//    contents, template markers inside messages) rendered with a builtin template and with a
//    real model's template, then tokenized as the server does;
//  * set: the rest is a template source, optionally followed by "\x1e\x1e" and a JSON
//    context object, parsed and rendered with small limits.
// Either way parsing and rendering succeed or throw lift::Error (TemplateError, the
// template's own raise_exception) with a short valid-UTF-8 message; nothing crashes, hangs or
// grows past the limits.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "gguf/gguf_file.h"
#include "server/chat_template.h"
#include "template/template.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

void check_error(const lift::Error& e, size_t limit) {
  const std::string_view msg = e.what();
  lift::fuzz::check(msg.size() <= limit, "template errors are short", msg);
  lift::fuzz::check(lift::is_valid_utf8(msg), "template errors are valid UTF-8", msg);
}

void fuzz_source(std::string_view rest) {
  using namespace lift;
  const size_t sep = rest.find("\x1e\x1e");
  const std::string_view source = rest.substr(0, sep);
  nlohmann::ordered_json ctx = {
      {"messages",
       {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Yo"}}}},
      {"add_generation_prompt", true},
      {"bos_token", "<s>"},
      {"eos_token", "</s>"},
      {"tools", nullptr}};
  if (sep != std::string_view::npos) {
    const auto j = nlohmann::ordered_json::parse(rest.substr(sep + 2), nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.dump().size() < 8192) ctx = j;
  }
  tmpl::RenderOptions opts;
  opts.max_output_bytes = 1 << 16;
  opts.max_steps = 20000;
  opts.max_call_depth = 16;
  opts.now_unix = 0;
  try {
    const tmpl::Template t(source);
    const std::string out = t.render(tmpl::from_json(ctx).obj(), opts);
    fuzz::check(out.size() <= opts.max_output_bytes, "output stays under the limit");
  } catch (const tmpl::TemplateRaise&) {
    // The template's own message: whatever it computed, bounded by the output limit.
  } catch (const Error& e) {
    check_error(e, source.size() + 400);  // errors may quote the template's own names
  }
}

void fuzz_conversation(const uint8_t* data, size_t size) {
  using namespace lift;
  const fuzz::ChatInput in = fuzz::read_chat_input(data, size);
  ChatInput conv;
  conv.add_generation_prompt = in.add_generation_prompt;
  for (const auto& m : in.messages) {
    if (!is_valid_utf8(m.role) || !is_valid_utf8(m.content)) return;  // JSON has UTF-8 only
    conv.messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  if (conv.messages.empty()) return;
  static const gguf::File qwen =
      gguf::File::open(fuzz::models_dir() + "/vocab/ggml-vocab-qwen2.gguf");
  static const ChatTemplate model_template =
      choose_chat_template(qwen, "").tmpl;  // tools, namespaces, string methods
  const auto& formats = all_chat_formats();
  const ChatTemplate builtin(formats[in.format % formats.size()]);
  for (const ChatTemplate* t : {&builtin, &model_template}) {
    for (const size_t v : {size_t{2}, size_t{1}}) {
      const Tokenizer& tok = fuzz::tokenizer(v);
      try {
        const ChatPrompt p = build_chat_prompt(tok, *t, conv);
        fuzz::check(is_valid_utf8(p.text), "valid UTF-8 in, valid UTF-8 out");
        for (const int32_t id : p.tokens) {
          fuzz::check(id >= 0 && id < tok.vocab().size(), "prompt ids are in range");
        }
      } catch (const ChatTemplateRefused& e) {
        check_error(e, 400);
      } catch (const Error& e) {
        check_error(e, 1000);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 0x80) {
    fuzz_source(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  } else {
    fuzz_conversation(data, size);
  }
  return 0;
}
