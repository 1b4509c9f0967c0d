// Chat templates lift ships, for `--chat-template NAME` and for models without a
// tokenizer.chat_template: Jinja sources in the layout of each family's reference template.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace lift::tmpl {

// chatml, llama2, llama3, mistral, gemma, zephyr, phi3 (in this order).
const std::vector<std::string_view>& builtin_chat_template_names();
// The Jinja source for `name` (ASCII case-insensitive); nullopt for an unknown name.
std::optional<std::string_view> builtin_chat_template(std::string_view name);

}  // namespace lift::tmpl
