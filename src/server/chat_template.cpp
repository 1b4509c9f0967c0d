#include "server/chat_template.h"

#include <array>
#include <cstddef>
#include <initializer_list>
#include <utility>

#include "gguf/gguf_file.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace lift {

namespace {

constexpr std::array<std::pair<ChatFormat, std::string_view>, 7> kNames{{
    {ChatFormat::chatml, "chatml"},
    {ChatFormat::llama2, "llama2"},
    {ChatFormat::llama3, "llama3"},
    {ChatFormat::mistral, "mistral"},
    {ChatFormat::gemma, "gemma"},
    {ChatFormat::zephyr, "zephyr"},
    {ChatFormat::phi3, "phi3"},
}};

std::string valid_names() {
  std::string s;
  for (const auto& [f, name] : kNames) {
    if (!s.empty()) s += ", ";
    s += name;
  }
  return s;
}

bool has(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// Jinja's trim filter for ASCII whitespace.
std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

enum class Role { system, user, assistant };

std::string_view role_name(Role r) {
  switch (r) {
    case Role::system:
      return "system";
    case Role::user:
      return "user";
    case Role::assistant:
      return "assistant";
  }
  return "user";
}

struct Turn {
  Role role;
  std::string_view content;
};

std::vector<Turn> validate(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw Error("chat: there are no messages to render");
  std::vector<Turn> turns;
  turns.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    Role role;
    if (r == "system" || r == "developer") {
      role = Role::system;
    } else if (r == "user") {
      role = Role::user;
    } else if (r == "assistant") {
      role = Role::assistant;
    } else {
      // The role is the client's text: quoted as a short excerpt only.
      throw Error("chat: message " + std::to_string(i) + " has unsupported role '" + excerpt(r) +
                  "' (expected system, user, assistant or developer)");
    }
    turns.push_back({role, messages[i].content});
  }
  return turns;
}

// For the formats without a system role of their own (llama2, mistral, gemma): splits off an
// optional leading system message and checks that the rest alternates user/assistant starting
// with user, as the reference templates require (they raise an exception otherwise).
struct Alternating {
  std::optional<std::string_view> system;
  std::vector<Turn> turns;  // user, assistant, user, ...
};

Alternating split_alternating(ChatFormat f, const std::vector<Turn>& all) {
  Alternating a;
  size_t start = 0;
  if (all[0].role == Role::system) {
    a.system = all[0].content;
    start = 1;
  }
  const std::string fmt(chat_format_name(f));
  if (start == all.size()) {
    throw Error("chat format '" + fmt +
                "': the system message must be followed by a user message (this format has "
                "no system turn of its own; the system message is added to the first user "
                "message)");
  }
  for (size_t i = start; i < all.size(); ++i) {
    const Role want = (i - start) % 2 == 0 ? Role::user : Role::assistant;
    if (all[i].role == Role::system) {
      throw Error("chat format '" + fmt + "': message " + std::to_string(i) +
                  " is a system message; this format supports only one system message, as the "
                  "first message");
    }
    if (all[i].role != want) {
      throw Error("chat format '" + fmt +
                  "': conversation roles must alternate user/assistant/user/assistant/... "
                  "after the optional first system message (message " +
                  std::to_string(i) + " is " + std::string(role_name(all[i].role)) + ", expected " +
                  std::string(role_name(want)) + ")");
    }
    a.turns.push_back(all[i]);
  }
  return a;
}

void append(std::string& out, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) out.append(p);
}

std::string render_chatml(const std::vector<Turn>& turns, bool gen) {
  std::string out;
  for (const Turn& t : turns) {
    append(out, {"<|im_start|>", role_name(t.role), "\n", t.content, "<|im_end|>\n"});
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama3(const std::vector<Turn>& turns, bool gen, std::string_view bos) {
  std::string out(bos);
  for (const Turn& t : turns) {
    append(out, {"<|start_header_id|>", role_name(t.role), "<|end_header_id|>\n\n", trim(t.content),
                 "<|eot_id|>"});
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string render_llama2(const Alternating& a, std::string_view bos, std::string_view eos) {
  std::string out;
  for (size_t i = 0; i < a.turns.size(); ++i) {
    const Turn& t = a.turns[i];
    if (t.role == Role::user) {
      std::string content;
      if (i == 0 && a.system) {
        append(content, {"<<SYS>>\n", *a.system, "\n<</SYS>>\n\n", t.content});
      } else {
        content = t.content;
      }
      append(out, {bos, "[INST] ", trim(content), " [/INST]"});
    } else {
      append(out, {" ", trim(t.content), " ", eos});
    }
  }
  return out;
}

std::string render_mistral(const Alternating& a, std::string_view bos, std::string_view eos) {
  std::string out(bos);
  for (size_t i = 0; i < a.turns.size(); ++i) {
    const Turn& t = a.turns[i];
    if (t.role == Role::user) {
      out += " [INST] ";
      if (i == 0 && a.system) append(out, {*a.system, "\n\n"});
      append(out, {t.content, " [/INST]"});
    } else {
      append(out, {" ", t.content, eos});
    }
  }
  return out;
}

std::string render_gemma(const Alternating& a, bool gen, std::string_view bos) {
  std::string out(bos);
  for (size_t i = 0; i < a.turns.size(); ++i) {
    const Turn& t = a.turns[i];
    append(out, {"<start_of_turn>", t.role == Role::user ? "user" : "model", "\n"});
    if (i == 0 && a.system) append(out, {*a.system, "\n\n"});
    append(out, {trim(t.content), "<end_of_turn>\n"});
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

std::string render_zephyr(const std::vector<Turn>& turns, bool gen, std::string_view eos) {
  std::string out;
  for (const Turn& t : turns) {
    append(out, {"<|", role_name(t.role), "|>\n", t.content, eos, "\n"});
  }
  if (gen) out += "<|assistant|>\n";
  return out;
}

std::string render_phi3(const std::vector<Turn>& turns, bool gen, std::string_view eos) {
  std::string out;
  for (const Turn& t : turns) {
    if (t.role == Role::system && t.content.empty()) continue;
    append(out, {"<|", role_name(t.role), "|>\n", t.content, "<|end|>\n"});
  }
  out += gen ? std::string_view("<|assistant|>\n") : eos;
  return out;
}

}  // namespace

std::string_view chat_format_name(ChatFormat f) {
  for (const auto& [format, name] : kNames) {
    if (format == f) return name;
  }
  return "unknown";
}

const std::vector<ChatFormat>& all_chat_formats() {
  static const std::vector<ChatFormat> all = [] {
    std::vector<ChatFormat> v;
    for (const auto& [f, name] : kNames) v.push_back(f);
    return v;
  }();
  return all;
}

ChatFormat parse_chat_format(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  for (const auto& [f, n] : kNames) {
    if (n == lower) return f;
  }
  throw Error("unknown chat template '" + std::string(name) + "'; valid names: " + valid_names());
}

std::optional<ChatFormat> detect_chat_format(std::string_view t) {
  if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return ChatFormat::llama3;
  if (has(t, "<|im_start|>")) {
    if (has(t, "<|im_sep|>")) return std::nullopt;  // Phi-4: ChatML with <|im_sep|> headers
    return ChatFormat::chatml;
  }
  if (has(t, "<start_of_turn>")) return ChatFormat::gemma;
  if (has(t, "<|user|>") && has(t, "<|assistant|>")) {
    if (has(t, "<|end|>")) return ChatFormat::phi3;
    if (has(t, "[gMASK]")) return std::nullopt;  // ChatGLM / GLM-4
    if (has(t, "eos_token") || has(t, "</s>")) return ChatFormat::zephyr;
    return std::nullopt;
  }
  if (has(t, "[INST]")) return has(t, "<<SYS>>") ? ChatFormat::llama2 : ChatFormat::mistral;
  return std::nullopt;
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, std::string_view bos_text,
                        std::string_view eos_text) {
  const std::vector<Turn> turns = validate(messages);
  switch (f) {
    case ChatFormat::chatml:
      return render_chatml(turns, add_generation_prompt);
    case ChatFormat::llama3:
      return render_llama3(turns, add_generation_prompt, bos_text);
    case ChatFormat::llama2:
      return render_llama2(split_alternating(f, turns), bos_text, eos_text);
    case ChatFormat::mistral:
      return render_mistral(split_alternating(f, turns), bos_text, eos_text);
    case ChatFormat::gemma:
      return render_gemma(split_alternating(f, turns), add_generation_prompt, bos_text);
    case ChatFormat::zephyr:
      return render_zephyr(turns, add_generation_prompt, eos_text);
    case ChatFormat::phi3:
      return render_phi3(turns, add_generation_prompt, eos_text);
  }
  throw Error("chat: unknown chat format");
}

bool renders_bos(ChatFormat f) {
  switch (f) {
    case ChatFormat::llama2:
    case ChatFormat::llama3:
    case ChatFormat::mistral:
    case ChatFormat::gemma:
      return true;
    case ChatFormat::chatml:
    case ChatFormat::zephyr:
    case ChatFormat::phi3:
      return false;
  }
  return false;
}

std::vector<std::string> stop_strings(ChatFormat f) {
  switch (f) {
    case ChatFormat::chatml:
      return {"<|im_end|>"};
    case ChatFormat::llama3:
      return {"<|eot_id|>"};
    case ChatFormat::gemma:
      return {"<end_of_turn>"};
    case ChatFormat::phi3:
      return {"<|end|>"};
    case ChatFormat::llama2:
    case ChatFormat::mistral:
    case ChatFormat::zephyr:
      return {};
  }
  return {};
}

ChatTemplate choose_chat_template(const gguf::File& file, std::optional<ChatFormat> forced) {
  ChatTemplate ct;
  if (forced) {
    ct.format = *forced;
    ct.from_model = false;
    ct.note = "chat template: " + std::string(chat_format_name(*forced)) +
              " (chosen with --chat-template)";
    return ct;
  }
  std::optional<std::string_view> jinja;
  std::string problem;
  try {
    jinja = file.get_string("tokenizer.chat_template");
  } catch (const Error&) {
    problem = "its tokenizer.chat_template is not a string";
  }
  if (jinja) {
    if (const auto f = detect_chat_format(*jinja)) {
      ct.format = *f;
      ct.from_model = true;
      ct.note = "chat template: " + std::string(chat_format_name(*f)) +
                " (detected from the model's tokenizer.chat_template)";
      return ct;
    }
    problem = "its tokenizer.chat_template is not one of the formats lift recognises (" +
              valid_names() + ")";
  } else if (problem.empty()) {
    problem = "the model has no tokenizer.chat_template";
  }
  ct.format = ChatFormat::chatml;
  ct.from_model = false;
  ct.note = "chat template: chatml (fallback: " + problem +
            "); pass --chat-template NAME to choose another";
  return ct;
}

ChatPrompt build_chat_prompt(const Tokenizer& tok, ChatFormat format,
                             const std::vector<ChatMessage>& messages) {
  ChatPrompt p;
  const std::string text = render_chat(format, messages, /*add_generation_prompt=*/true,
                                       tok.token_to_piece(tok.vocab().bos_id(), true),
                                       tok.token_to_piece(tok.vocab().eos_id(), true));
  // The rendered text carries the template's special tokens (and BOS where the template
  // has one), so it is tokenized with special tokens parsed and no extra BOS.
  p.tokens = tok.encode(text, /*add_bos=*/false, /*parse_special=*/true);
  // End-of-turn markers are special tokens in the models that use them: stop on the token
  // (special tokens decode to no text). In a vocabulary without them, match the text.
  for (const auto& s : stop_strings(format)) {
    const auto ids = tok.encode(s, false, true);
    if (ids.size() == 1 && tok.vocab().is_control(ids[0])) {
      p.stop_token_ids.push_back(ids[0]);
    } else {
      p.stop.push_back(s);
    }
  }
  return p;
}

}  // namespace lift
