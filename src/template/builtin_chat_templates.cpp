#include "template/builtin_chat_templates.h"

#include <array>
#include <string>
#include <utility>

namespace lift::tmpl {

namespace {

// ChatML (Qwen, Yi, Hermes, ...): no BOS, <|im_start|>ROLE\n...<|im_end|>\n. With tools, a
// system turn lists them and says how to call one; calls and results are written in the
// <tool_call> / <tool_response> form the hermes parser reads (what lift announces for it).
constexpr std::string_view kChatml =
    "{%- if tools -%}\n"
    "  {{- '<|im_start|>system\\n' -}}\n"
    "  {%- if messages[0]['role'] == 'system' -%}"
    "{{- (messages[0]['content'] or '') + '\\n\\n' -}}{%- endif -%}\n"
    "  {{- '# Tools\\n\\nThese functions may be called; their signatures, as JSON:\\n<tools>' -}}\n"
    "  {%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}\n"
    "  {{- '\\n</tools>\\n\\nTo call one, write its name and arguments as one JSON object "
    "between tags:\\n<tool_call>\\n{\"name\": <name>, \"arguments\": <an object>}\\n"
    "</tool_call><|im_end|>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- for message in messages -%}\n"
    "  {%- if message['role'] == 'system' and loop.first and tools -%}\n"
    "  {%- elif message['role'] == 'tool' -%}\n"
    "    {{- '<|im_start|>user\\n<tool_response>\\n' + (message['content'] or '') + "
    "'\\n</tool_response><|im_end|>\\n' -}}\n"
    "  {%- elif message['role'] == 'assistant' and message['tool_calls'] is defined and "
    "message['tool_calls'] -%}\n"
    "    {{- '<|im_start|>assistant\\n' + (message['content'] or '') -}}\n"
    "    {%- for call in message['tool_calls'] -%}\n"
    "      {%- if message['content'] or not loop.first -%}{{- '\\n' -}}{%- endif -%}\n"
    "      {{- '<tool_call>\\n{\"name\": ' + (call['function']['name'] | tojson) + "
    "', \"arguments\": ' + ((call['function']['arguments'] if call['function']['arguments'] "
    "is defined else {}) | tojson) + '}\\n</tool_call>' -}}\n"
    "    {%- endfor -%}\n"
    "    {{- '<|im_end|>\\n' -}}\n"
    "  {%- else -%}\n"
    "    {{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + "
    "'<|im_end|>\\n' -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

// Llama 2 chat: BOS before every user turn, the system message inside the first one.
constexpr std::string_view kLlama2 =
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "  {%- set system_message = messages[0]['content'] -%}{%- set loop_messages = messages[1:] "
    "-%}\n"
    "{%- else -%}\n"
    "  {%- set system_message = none -%}{%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "  {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "    {{- raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') -}}\n"
    "  {%- endif -%}\n"
    "  {%- if loop.index0 == 0 and system_message is not none -%}\n"
    "    {%- set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
    "message['content'] -%}\n"
    "  {%- else -%}{%- set content = message['content'] -%}{%- endif -%}\n"
    "  {%- if message['role'] == 'user' -%}\n"
    "    {{- bos_token + '[INST] ' + content | trim + ' [/INST]' -}}\n"
    "  {%- else -%}\n"
    "    {{- ' ' + content | trim + ' ' + eos_token -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n";

// Llama 3: headers per turn, contents trimmed.
constexpr std::string_view kLlama3 =
    "{{- bos_token -}}\n"
    "{%- for message in messages -%}\n"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}\n";

// Mistral's first layout (7B Instruct v0.1/v0.2, Mixtral): the system message goes before the
// first user message.
constexpr std::string_view kMistral =
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "  {%- set system_message = messages[0]['content'] -%}{%- set loop_messages = messages[1:] "
    "-%}\n"
    "{%- else -%}\n"
    "  {%- set system_message = none -%}{%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{{- bos_token -}}\n"
    "{%- for message in loop_messages -%}\n"
    "  {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "    {{- raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') -}}\n"
    "  {%- endif -%}\n"
    "  {%- if message['role'] == 'user' -%}\n"
    "    {%- if loop.first and system_message is not none -%}\n"
    "      {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' -}}\n"
    "    {%- else -%}{{- ' [INST] ' + message['content'] + ' [/INST]' -}}{%- endif -%}\n"
    "  {%- else -%}\n"
    "    {{- ' ' + message['content'] + eos_token -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n";

// Gemma 2/3: the assistant is "model"; the system message is prepended to the first user turn.
constexpr std::string_view kGemma =
    "{{- bos_token -}}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "  {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "  {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "  {%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "  {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "    {{- raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') -}}\n"
    "  {%- endif -%}\n"
    "  {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
    "  {{- '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') -}}\n"
    "  {{- message['content'] | trim -}}\n"
    "  {{- '<end_of_turn>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}\n";

// Zephyr: <|role|>\n...EOS\n.
constexpr std::string_view kZephyr =
    "{%- for message in messages -%}\n"
    "{{- '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}\n";

// Phi-3/3.5: empty system messages are left out; without a generation prompt the text ends
// with EOS.
constexpr std::string_view kPhi3 =
    "{%- for message in messages -%}\n"
    "  {%- if message['role'] != 'system' or message['content'] -%}\n"
    "    {{- '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- else -%}"
    "{{- eos_token -}}{%- endif -%}\n";

constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kBuiltins{{
    {"chatml", kChatml},
    {"llama2", kLlama2},
    {"llama3", kLlama3},
    {"mistral", kMistral},
    {"gemma", kGemma},
    {"zephyr", kZephyr},
    {"phi3", kPhi3},
}};

}  // namespace

const std::vector<std::string_view>& builtin_chat_template_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& [name, source] : kBuiltins) v.push_back(name);
    return v;
  }();
  return names;
}

std::optional<std::string_view> builtin_chat_template(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  for (const auto& [n, source] : kBuiltins) {
    if (n == lower) return source;
  }
  return std::nullopt;
}

}  // namespace lift::tmpl
