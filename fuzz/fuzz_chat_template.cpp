// libFuzzer target for chat templates: hostile conversations (any roles, any bytes in the
// contents, template markers and BOS/EOS texts inside messages, wrong role orders) rendered in
// every format. Rendering either succeeds, with every message's (trimmed) content in the
// prompt, or throws lift::Error with a short, valid-UTF-8 message; tokenizing the prompt for
// a real vocabulary gives ids in range. The input doubles as a Jinja template for detection
// and as a --chat-template name.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "server/chat_template.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

void check_error(const lift::Error& e) {
  const std::string_view msg = e.what();
  lift::fuzz::check(msg.size() <= 400, "chat template errors are at most 400 bytes", msg);
  lift::fuzz::check(lift::is_valid_utf8(msg), "chat template errors are valid UTF-8", msg);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lift;
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  (void)detect_chat_format(raw);
  try {
    (void)parse_chat_format(raw.substr(0, 64));
  } catch (const Error&) {
  }

  const fuzz::ChatInput in = fuzz::read_chat_input(data, size);
  std::vector<ChatMessage> messages;
  bool all_valid = true;
  for (const auto& m : in.messages) {
    messages.push_back({m.role, m.content});
    all_valid = all_valid && is_valid_utf8(m.role) && is_valid_utf8(m.content);
  }
  const auto& formats = all_chat_formats();
  const ChatFormat f = formats[in.format % formats.size()];
  std::string out;
  try {
    out = render_chat(f, messages, in.add_generation_prompt, "<s>", "</s>");
  } catch (const Error& e) {
    check_error(e);
    return 0;
  }
  if (all_valid) fuzz::check(is_valid_utf8(out), "valid UTF-8 in, valid UTF-8 out");
  if (renders_bos(f)) fuzz::check(out.starts_with("<s>"), "the prompt starts with BOS");
  for (const ChatMessage& m : messages) {
    fuzz::check(out.find(trim(m.content)) != std::string::npos, "every content is in the prompt",
                m.content);
  }
  // The same conversation through a real vocabulary, as the server builds it.
  for (const size_t v : {size_t{2}, size_t{1}}) {
    const Tokenizer& tok = fuzz::tokenizer(v);
    try {
      const ChatPrompt p = build_chat_prompt(tok, f, messages);
      for (const int32_t id : p.tokens) {
        fuzz::check(id >= 0 && id < tok.vocab().size(), "prompt ids are in range");
      }
      fuzz::check(!p.tokens.empty(), "a rendered prompt has tokens");
    } catch (const Error& e) {
      fuzz::fail("a conversation that renders also builds", e.what());
    }
  }
  return 0;
}
