// Chat templates: turning an OpenAI-style conversation into a prompt.
//
// Models ship their chat template as a Jinja program in the GGUF key tokenizer.chat_template.
// lift runs that program as written with its own interpreter (src/template, the subset of
// Jinja2 chat templates use; docs/templates.md), in the environment Hugging Face's
// apply_chat_template uses, so the prompt is byte-for-byte what transformers (and vLLM)
// produce. The template sees:
//   messages               the request's messages (content parts joined into one string;
//                          tool_calls with their arguments parsed into objects)
//   tools                  the request's tools, or None
//   documents              None
//   add_generation_prompt  whether to open the assistant's turn
//   bos_token, eos_token   the model's BOS/EOS token texts
//   ...                    the request's chat_template_kwargs (e.g. enable_thinking)
//
// The rendered text carries the template's special tokens (and BOS where the template writes
// bos_token), so it is tokenized with special tokens parsed and no BOS added, as HF does.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace lift {

namespace gguf {
class File;
}
class Tokenizer;
namespace tmpl {
class Template;
}

// The templates lift ships, by the name --chat-template takes.
enum class ChatFormat { chatml, llama2, llama3, mistral, gemma, zephyr, phi3 };
std::string_view chat_format_name(ChatFormat f);
const std::vector<ChatFormat>& all_chat_formats();
// ASCII case-insensitive; throws lift::Error listing the valid names.
ChatFormat parse_chat_format(std::string_view name);

// raise_exception() in a template: the conversation is one the template refuses; the
// message is the template's (a server answers 400 with it).
class ChatTemplateRefused : public Error {
 public:
  using Error::Error;
};

// What a template renders.
// JSON with its objects' keys in the client's order, as Python's dicts keep them.
struct ChatInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null or an array
  bool add_generation_prompt = true;
  // The rendering ends inside the final (assistant) message, right after its text, so that the
  // model goes on writing it (vLLM's and Hugging Face's continue_final_message).
  bool continue_final_message = false;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

// A compiled template; cheap to copy (the program is shared).
class ChatTemplate {
 public:
  ChatTemplate(ChatFormat builtin);  // NOLINT: implicit, a builtin is a template
  // Throws lift::Error naming `origin` (e.g. "the model's tokenizer.chat_template") and the
  // line when `source` is not a template lift can run.
  ChatTemplate(std::string source, std::string origin);

  const std::string& source() const;
  const std::string& origin() const;
  // Throws ChatTemplateRefused for raise_exception(), lift::Error for any other failure (a
  // template error, a kwarg that would replace messages/tools/add_generation_prompt).
  std::string render(const ChatInput& in, std::string_view bos_text,
                     std::string_view eos_text) const;
  // The end-of-turn markers the template writes (<|im_end|>, <|eot_id|>, <end_of_turn>, ...):
  // generation stops on them as well as on EOS.
  const std::vector<std::string>& end_markers() const;

 private:
  struct Impl;
  static std::shared_ptr<const Impl> builtin(ChatFormat f);
  std::string continue_final_message(const nlohmann::ordered_json& ctx,
                                     const std::string& plain) const;
  std::shared_ptr<const Impl> impl_;
};

struct ChosenTemplate {
  ChatTemplate tmpl;
  std::string note;  // one line saying what was chosen and why (printed at start-up)
};

// The template for a model: `spec` (from --chat-template) when given -- a builtin name, a
// file holding a template, or the template itself inline (anything with "{{" or "{%");
// otherwise the model's tokenizer.chat_template; a model without one gets the chatml
// builtin, as llama.cpp does. Throws lift::Error for a template that does not parse, a
// missing file, or a tokenizer.chat_template that is not a string.
ChosenTemplate choose_chat_template(const gguf::File& file, const std::string& spec);

// A conversation rendered and tokenized, with the template's end-of-turn markers as stop
// tokens (or stop strings where the vocabulary lacks them).
struct ChatPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;
};
ChatPrompt build_chat_prompt(const Tokenizer& tok, const ChatTemplate& t, const ChatInput& in);
// The rendered text only (POST /apply-template).
std::string render_chat_prompt(const Tokenizer& tok, const ChatTemplate& t, const ChatInput& in);

}  // namespace lift
