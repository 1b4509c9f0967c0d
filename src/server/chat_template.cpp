#include "server/chat_template.h"

#include <array>
#include <fstream>
#include <sstream>
#include <utility>

#include "gguf/gguf_file.h"
#include "template/builtin_chat_templates.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

namespace lift {

namespace {

constexpr std::array<ChatFormat, 7> kFormats{
    ChatFormat::chatml, ChatFormat::llama2, ChatFormat::llama3, ChatFormat::mistral,
    ChatFormat::gemma,  ChatFormat::zephyr, ChatFormat::phi3};

std::string valid_names() {
  std::string s;
  for (std::string_view n : tmpl::builtin_chat_template_names()) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

// Turn-ending special tokens of the common template families; those a template writes
// become stop markers.
constexpr std::array<std::string_view, 7> kEndMarkers{
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<end_of_turn>",
    "<|end|>",
    "<|endoftext|>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};  // DeepSeek

}  // namespace

std::string_view chat_format_name(ChatFormat f) {
  return tmpl::builtin_chat_template_names()[static_cast<size_t>(f)];
}

const std::vector<ChatFormat>& all_chat_formats() {
  static const std::vector<ChatFormat> all(kFormats.begin(), kFormats.end());
  return all;
}

ChatFormat parse_chat_format(std::string_view name) {
  if (tmpl::builtin_chat_template(name)) {
    std::string lower(name);
    for (char& c : lower) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    for (ChatFormat f : kFormats) {
      if (chat_format_name(f) == lower) return f;
    }
  }
  throw Error("unknown chat template '" + std::string(name) + "'; valid names: " + valid_names());
}

struct ChatTemplate::Impl {
  std::string source;
  std::string origin;
  tmpl::Template program;
  std::vector<std::string> end_markers;

  Impl(std::string src, std::string from)
      : source(std::move(src)), origin(std::move(from)), program(compile(source, origin)) {
    for (std::string_view m : kEndMarkers) {
      if (source.find(m) != std::string::npos) end_markers.emplace_back(m);
    }
  }

  static tmpl::Template compile(const std::string& src, const std::string& origin) {
    try {
      return tmpl::Template(src);
    } catch (const tmpl::TemplateError& e) {
      throw Error(origin + " is not a chat template lift can run: " + e.what());
    }
  }
};

ChatTemplate::ChatTemplate(ChatFormat f) : impl_(builtin(f)) {}

ChatTemplate::ChatTemplate(std::string source, std::string origin)
    : impl_(std::make_shared<const Impl>(std::move(source), std::move(origin))) {}

const std::string& ChatTemplate::source() const { return impl_->source; }
const std::string& ChatTemplate::origin() const { return impl_->origin; }
const std::vector<std::string>& ChatTemplate::end_markers() const { return impl_->end_markers; }

// continue_final_message: the text up to the end of the last message's text, so that the
// model goes on with it. A marker after the text finds the end (searching for the text itself
// could land in markup after it: "end" in "<|im_end|>"); the text's trailing whitespace stays
// where the template keeps it (`plain`, rendered as usual, has it at the same place) and goes
// where the template trims it, as Hugging Face decides.
std::string ChatTemplate::continue_final_message(const nlohmann::ordered_json& ctx,
                                                 const std::string& plain) const {
  static constexpr std::string_view kMarker = "<<lift: the final message ends here>>";
  const auto& last = ctx["messages"].back();
  if (!last.is_object() || !last.contains("content") || !last["content"].is_string()) {
    throw Error("continue_final_message needs the last message to have text content");
  }
  const std::string& content = last["content"].get_ref<const std::string&>();
  nlohmann::ordered_json marked = ctx;
  marked["messages"].back()["content"] = content + std::string(kMarker);
  std::string text = impl_->program.render(tmpl::from_json(marked).obj());
  const size_t at = text.rfind(kMarker);
  if (at == std::string::npos) {
    throw Error(
        "continue_final_message: the chat template does not write the last message's "
        "text as it is");
  }
  text.resize(at);
  const size_t kept = content.find_last_not_of(" \t\n\r");
  const size_t trailing = content.size() - (kept == std::string::npos ? 0 : kept + 1);
  const std::string_view tail = std::string_view(content).substr(content.size() - trailing);
  if (trailing > 0 && text.ends_with(tail) &&
      std::string_view(plain).substr(std::min(plain.size(), at - trailing), trailing) != tail) {
    text.resize(at - trailing);
  }
  return text;
}

std::string ChatTemplate::render(const ChatInput& in, std::string_view bos_text,
                                 std::string_view eos_text) const {
  nlohmann::ordered_json ctx = {
      {"messages", in.messages}, {"tools", in.tools},
      {"documents", nullptr},    {"add_generation_prompt", in.add_generation_prompt},
      {"bos_token", bos_text},   {"eos_token", eos_text}};
  if (in.kwargs.is_object()) {
    for (const auto& [k, v] : in.kwargs.items()) {
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt") {
        throw Error("chat_template_kwargs may not set '" + k + "'; it is a field of its own");
      }
      ctx[k] = v;
    }
  }
  try {
    std::string text = impl_->program.render(tmpl::from_json(ctx).obj());
    if (in.continue_final_message) text = continue_final_message(ctx, text);
    return text;
  } catch (const tmpl::TemplateRaise& e) {
    throw ChatTemplateRefused(e.what());
  } catch (const tmpl::TemplateError& e) {
    throw Error("the chat template failed on this conversation: " + std::string(e.what()));
  }
}

std::shared_ptr<const ChatTemplate::Impl> ChatTemplate::builtin(ChatFormat f) {
  static const std::vector<std::shared_ptr<const Impl>> all = [] {
    std::vector<std::shared_ptr<const Impl>> v;
    for (ChatFormat g : kFormats) {
      const std::string name(chat_format_name(g));
      v.push_back(std::make_shared<const Impl>(std::string(*tmpl::builtin_chat_template(name)),
                                               "the builtin template " + name));
    }
    return v;
  }();
  return all[static_cast<size_t>(f)];
}

namespace {

std::string read_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--chat-template: cannot read the file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

ChosenTemplate choose_chat_template(const gguf::File& file, const std::string& spec) {
  if (!spec.empty()) {
    if (tmpl::builtin_chat_template(spec)) {
      const ChatFormat f = parse_chat_format(spec);
      return {ChatTemplate(f), "chat template: the builtin " + std::string(chat_format_name(f)) +
                                   " (chosen with --chat-template)"};
    }
    if (spec.find("{{") != std::string::npos || spec.find("{%") != std::string::npos) {
      return {ChatTemplate(spec, "the --chat-template text"),
              "chat template: given inline with --chat-template"};
    }
    std::ifstream probe(spec);
    if (!probe) {
      throw Error("--chat-template '" + spec + "' is neither a builtin name (" + valid_names() +
                  "), a readable file, nor an inline template");
    }
    return {ChatTemplate(read_template_file(spec), "the template file '" + spec + "'"),
            "chat template: from the file " + spec + " (chosen with --chat-template)"};
  }
  std::optional<std::string_view> jinja;
  try {
    jinja = file.get_string("tokenizer.chat_template");
  } catch (const Error&) {
    throw Error("the model's tokenizer.chat_template is not a string; pass --chat-template");
  }
  if (jinja) {
    return {ChatTemplate(std::string(*jinja), "the model's tokenizer.chat_template"),
            "chat template: the model's own (tokenizer.chat_template, " +
                std::to_string(jinja->size()) + " bytes)"};
  }
  return {ChatTemplate(ChatFormat::chatml),
          "chat template: the builtin chatml (the model has no tokenizer.chat_template); pass "
          "--chat-template NAME|FILE to choose another"};
}

std::string render_chat_prompt(const Tokenizer& tok, const ChatTemplate& t, const ChatInput& in) {
  auto piece = [&](int32_t id) {
    return id >= 0 ? std::string(tok.token_to_piece(id, true)) : std::string();
  };
  return t.render(in, piece(tok.vocab().bos_id()), piece(tok.vocab().eos_id()));
}

ChatPrompt build_chat_prompt(const Tokenizer& tok, const ChatTemplate& t, const ChatInput& in) {
  ChatPrompt p;
  p.text = render_chat_prompt(tok, t, in);
  p.tokens = tok.encode(p.text, /*add_bos=*/false, /*parse_special=*/true);
  // End-of-turn markers are special tokens in the models that use them: stop on the token
  // (special tokens decode to no text). In a vocabulary without them, match the text.
  for (const std::string& s : t.end_markers()) {
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
