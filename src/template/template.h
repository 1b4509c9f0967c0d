// A Jinja2 chat template, parsed once and rendered many times.
//
// lift renders a model's tokenizer.chat_template itself, with the subset of Jinja2 that chat
// templates use (docs/templates.md lists it) and the environment Hugging Face's
// apply_chat_template uses: trim_blocks and lstrip_blocks on, the loop controls extension
// (break/continue), HF's tojson (ensure_ascii=False, no HTML escaping), raise_exception()
// and strftime_now(). Rendering is byte-for-byte what Python's Jinja2 prints for the same
// template and context; tests/template checks that against Jinja2 itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "template/value.h"

namespace lift::tmpl {

struct Stmt;

// Bounds on one render, so a hostile template or context fails with a TemplateError instead
// of running away with memory or time.
struct RenderOptions {
  size_t max_output_bytes = size_t{8} << 20;
  int64_t max_steps = 2'000'000;  // loop iterations + macro calls + list items built
  int max_call_depth = 40;        // nested macro calls
  // strftime_now() reads this time (seconds since the epoch, local time zone) when set,
  // the clock otherwise.
  std::optional<int64_t> now_unix;
};

class Template {
 public:
  // Throws TemplateError (naming the line) for a source the parser does not accept.
  explicit Template(std::string_view source);

  // `context` holds the template's variables (messages, add_generation_prompt, bos_token,
  // ...). Throws TemplateRaise for raise_exception(), TemplateError for anything else.
  std::string render(const Object& context, const RenderOptions& opts = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace lift::tmpl
