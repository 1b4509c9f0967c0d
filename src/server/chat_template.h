// Chat templates: turning an OpenAI-style list of messages into a prompt.
//
// Models ship their chat template as a Jinja program in the GGUF key tokenizer.chat_template.
// lift does not interpret Jinja. Instead detect_chat_format() recognises which of a few common
// formats the template implements, by the marker strings it contains, and render_chat()
// renders that format natively. For plain text messages (roles system, user, assistant) the
// rendering is byte-for-byte what the model's reference template produces:
//
//   chatml   <|im_start|>ROLE\nCONTENT<|im_end|>\n ...  <|im_start|>assistant\n
//            (Qwen, Yi, Hermes, ...; no BOS)
//   llama2   BOS[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ASSISTANT EOS BOS[INST] ...
//            (Llama 2 chat, CodeLlama instruct; contents trimmed, BOS before every user turn)
//   llama3   BOS<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ...
//            <|start_header_id|>assistant<|end_header_id|>\n\n  (contents trimmed)
//   mistral  BOS [INST] SYSTEM\n\nUSER [/INST] ASSISTANT EOS [INST] USER [/INST]
//            (Mistral's "tokenizer V1" layout: Mistral 7B Instruct v0.1/v0.2, Mixtral 8x7B;
//            the system message is prepended to the first user message)
//   gemma    BOS<start_of_turn>user\nSYSTEM\n\nUSER<end_of_turn>\n<start_of_turn>model\n...
//            (assistant is called "model"; the system message is prepended to the first user
//            message as Gemma 3's template does; contents trimmed)
//   zephyr   <|system|>\nSYSTEM EOS\n<|user|>\nUSER EOS\n<|assistant|>\n...
//   phi3     <|system|>\nSYSTEM<|end|>\n<|user|>\nUSER<|end|>\n<|assistant|>\n ...
//            (an empty system message is left out; without add_generation_prompt the prompt
//            ends with EOS, as Phi-3.5's template does)
//
// "Trimmed" is Jinja's trim filter: leading and trailing whitespace removed (ASCII whitespace
// here; Python also strips Unicode spaces such as U+00A0).
//
// BOS: where the reference template starts with the BOS token (llama2, llama3, mistral, gemma;
// see renders_bos()), render_chat() writes bos_text into the string itself. The caller must
// then tokenize the whole rendered prompt with parse_special = true (so "<s>", "<|eot_id|>",
// "<start_of_turn>" ... become their special tokens) and add_bos = false, so BOS is not doubled.
// This matches Hugging Face's apply_chat_template, which also tokenizes without adding special
// tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lift {

namespace gguf {
class File;
}
class Tokenizer;

enum class ChatFormat { chatml, llama2, llama3, mistral, gemma, zephyr, phi3 };

// The name used by --chat-template ("chatml", "llama2", ...).
std::string_view chat_format_name(ChatFormat f);
// All formats, in declaration order.
const std::vector<ChatFormat>& all_chat_formats();
// Parses a --chat-template name (ASCII case-insensitive); throws lift::Error listing the valid
// names for anything else.
ChatFormat parse_chat_format(std::string_view name);

// Which format a Jinja chat template implements, judged by distinctive markers; nullopt when it
// is none of the formats above (or one whose layout differs, e.g. Phi-4's <|im_sep|> variant of
// ChatML or GLM's [gMASK] templates). Checked in this order:
//   <|start_header_id|> and <|end_header_id|>         -> llama3
//   <|im_start|> (without <|im_sep|>)                  -> chatml  (tool-call extras are fine)
//   <start_of_turn>                                    -> gemma
//   <|user|> and <|assistant|> with <|end|>            -> phi3
//   <|user|> and <|assistant|> with eos_token or </s>  -> zephyr  (not with [gMASK])
//   [INST] with <<SYS>>                                -> llama2
//   [INST] without <<SYS>>                             -> mistral
// Mistral templates of later tokenizer versions (v3, Tekken, v7 with [SYSTEM_PROMPT]) are also
// reported as mistral; their reference output differs from render_chat(mistral) only in spaces
// around [INST]/[/INST] and in where the system message goes.
std::optional<ChatFormat> detect_chat_format(std::string_view jinja);

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"; "developer" is treated as "system"
  std::string content;
};

// Renders `messages` in format `f`; with add_generation_prompt the prompt ends with the header
// that opens the assistant's turn (llama2 and mistral have none: their prompt already ends with
// [/INST]). bos_text/eos_text are the model's BOS/EOS token texts (e.g. "<s>", "</s>").
// Throws lift::Error when:
//  * messages is empty, or a role is not system/user/assistant/developer (the error names it);
//  * llama2, mistral, gemma: a system message is anywhere but first, the other messages do not
//    alternate user/assistant/user/... starting with user (the reference templates raise an
//    exception there), or there is no user message (the templates would drop the system
//    message silently).
std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, std::string_view bos_text,
                        std::string_view eos_text);

// Whether render_chat() writes bos_text at the start of the prompt (see above).
bool renders_bos(ChatFormat f);

// Texts of the special tokens that end an assistant turn in format f besides the model's EOS
// token (which always ends generation): chatml <|im_end|>, llama3 <|eot_id|>, gemma
// <end_of_turn>, phi3 <|end|>. Empty for llama2, mistral and zephyr, whose turns end with EOS.
// These are special tokens: a server should stop on their ids (look them up in the vocabulary)
// or match them in text detokenized with special tokens shown.
std::vector<std::string> stop_strings(ChatFormat f);

struct ChatTemplate {
  ChatFormat format = ChatFormat::chatml;
  bool from_model = false;  // false: forced by the caller or the ChatML fallback
  std::string note;         // one human-readable line saying what was chosen and why
};

// Picks the chat format for a model: `forced` (from --chat-template) wins; otherwise the format
// detected from the model's tokenizer.chat_template; a model without a template, or with one
// that is not recognised, falls back to ChatML, and `note` says so (the server prints it at
// start-up).
ChatTemplate choose_chat_template(const gguf::File& file, std::optional<ChatFormat> forced);

// A conversation rendered with a chat template and tokenized, with the template's
// end-of-turn markers as stop tokens (or stop strings where the vocabulary lacks them).
struct ChatPrompt {
  std::vector<int32_t> tokens;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;
};
// Throws lift::Error for conversations the template rejects.
ChatPrompt build_chat_prompt(const Tokenizer& tok, ChatFormat format,
                             const std::vector<ChatMessage>& messages);

}  // namespace lift
