#include "server/tool_calls.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <random>

#include "util/error.h"

namespace lift {

namespace {

constexpr std::array<std::string_view, 4> kNames{"none", "llama3_json", "hermes", "mistral"};
constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralOpen = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
// Keys and names longer than this are not a call's (a function name has at most 64 bytes).
constexpr size_t kMaxKey = 64;
constexpr size_t kMaxName = 256;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat f) { return kNames[static_cast<size_t>(f)]; }

ToolCallFormat parse_tool_call_format(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<ToolCallFormat>(i);
  }
  throw Error("unknown tool-call syntax '" + std::string(name) +
              "'; valid names: llama3_json, hermes, mistral, none");
}

ToolCallFormat detect_tool_call_format(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has(kHermesOpen)) return ToolCallFormat::hermes;
  if (has(kMistralOpen)) return ToolCallFormat::mistral;
  if (has(kPythonTag) || (has("<|start_header_id|>") && has("\"parameters\""))) {
    return ToolCallFormat::llama3_json;
  }
  return ToolCallFormat::hermes;
}

std::string new_tool_call_id(ToolCallFormat f) {
  static constexpr std::string_view kAlnum =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlnum.size() - 1);
  const bool mistral = f == ToolCallFormat::mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[pick(rng)];
  return id;
}

ToolCallParser::ToolCallParser(ToolCallSetup setup) : setup_(std::move(setup)) {
  switch (setup_.format) {
    case ToolCallFormat::hermes:
      markers_.emplace_back(kHermesOpen);
      break;
    case ToolCallFormat::mistral:
      markers_.emplace_back(kMistralOpen);
      break;
    case ToolCallFormat::llama3_json:
      markers_.emplace_back(kPythonTag);
      break;
    case ToolCallFormat::none:
      break;
  }
  if (setup_.names.empty()) markers_.clear();  // nothing to call: everything is content
}

std::vector<ToolCallDelta> ToolCallParser::feed(std::string_view text) {
  for (char c : text) step(c);
  return std::exchange(out_, {});
}

std::vector<ToolCallDelta> ToolCallParser::finish() {
  switch (st_) {
    case St::text: {
      // A held marker prefix can no longer complete: it is text.
      const std::string held = std::exchange(partial_, {});
      for (char c : held) content_byte(c);
      if (!after_call_) content(ws_);
      ws_.clear();
      break;
    }
    case St::after_call:
      tag_.clear();
      break;
    default:
      if (have_name_) {
        // Cut off (max_tokens, or an end mid-call): the call keeps what was written, even
        // nothing, never a "{}" the model did not write (OpenAI's partial arguments).
        ++calls_;
      } else {
        content(pending_);
      }
      break;
  }
  st_ = St::text;
  pending_.clear();
  return std::exchange(out_, {});
}

void ToolCallParser::emit(ToolCallDelta::Kind kind, std::string_view text) {
  if (text.empty() && kind != ToolCallDelta::Kind::call) return;
  const int index = kind == ToolCallDelta::Kind::content ? -1 : calls_;
  if (kind != ToolCallDelta::Kind::call && !out_.empty() && out_.back().kind == kind &&
      out_.back().index == index) {
    out_.back().text += text;
    return;
  }
  out_.push_back({kind, index, std::string(text)});
}

void ToolCallParser::content(std::string_view s) {
  if (s.empty()) return;
  emit(ToolCallDelta::Kind::content, s);
  started_ = true;
  after_call_ = false;
}

void ToolCallParser::content_byte(char c) {
  if (!after_call_) emit(ToolCallDelta::Kind::content, ws_);
  ws_.clear();
  content(std::string_view(&c, 1));
}

std::string ToolCallParser::take_ws() {
  std::string w = after_call_ ? std::string() : ws_;
  ws_.clear();
  return w;
}

bool ToolCallParser::marker_allowed(char c) const {
  if (setup_.format == ToolCallFormat::llama3_json && started_) return false;
  return std::any_of(markers_.begin(), markers_.end(),
                     [c](const std::string& m) { return m[0] == c; });
}

const std::string* ToolCallParser::marker_for(std::string_view held) const {
  for (const std::string& m : markers_) {
    if (std::string_view(m).starts_with(held)) return &m;
  }
  return nullptr;
}

void ToolCallParser::step(char c) {
  if (st_ == St::text) return text_byte(c);
  if (st_ == St::after_call) {
    if (!after_call_byte(c)) {
      to_text_after_call();
      text_byte(c);
    }
    return;
  }
  if (!have_name_) pending_ += c;
  if (!call_byte(c)) fail(c);
}

void ToolCallParser::text_byte(char c) {
  if (!partial_.empty() || marker_allowed(c)) {
    partial_ += c;
    if (const std::string* m = marker_for(partial_)) {
      if (m->size() == partial_.size()) {
        pending_ = take_ws() + std::exchange(partial_, {});
        list_open_ = false;
        st_ = St::open;
      }
      return;
    }
    if (setup_.format == ToolCallFormat::mistral && !started_ && partial_.size() == 2) {
      // A reply opening with '[' not followed by TOOL_CALLS]: the bare call list.
      partial_.clear();
      pending_ = take_ws() + "[";
      list_open_ = true;
      st_ = St::list_item;
      return step(c);
    }
    // Not a marker: its first byte is text; the rest may start one.
    const std::string held = std::exchange(partial_, {});
    content_byte(held[0]);
    for (size_t i = 1; i < held.size(); ++i) step(held[i]);
    return;
  }
  if (setup_.format == ToolCallFormat::llama3_json && !started_ && c == '{' &&
      !setup_.names.empty()) {
    pending_ = take_ws() + "{";
    begin_object();
    return;
  }
  if (is_ws(c)) {
    ws_ += c;
    return;
  }
  content_byte(c);
}

void ToolCallParser::begin_object() {
  st_ = St::key_or_end;
  have_name_ = have_args_ = in_args_ = false;
  args_.clear();
}

bool ToolCallParser::call_byte(char c) {
  switch (st_) {
    case St::open:
      if (is_ws(c)) return true;
      if (setup_.format == ToolCallFormat::mistral && !list_open_) {
        if (c != '[') return false;
        list_open_ = true;
        st_ = St::list_item;
        return true;
      }
      if (c != '{') return false;
      begin_object();
      return true;
    case St::list_item:
      if (is_ws(c)) return true;
      if (c != '{') return false;
      begin_object();
      return true;
    case St::key_or_end:
    case St::key:
      if (is_ws(c)) return true;
      if (c == '}' && st_ == St::key_or_end) return end_object();
      if (c != '"') return false;
      key_.clear();
      key_esc_ = false;
      st_ = St::key_str;
      return true;
    case St::key_str:
      if (c == '"' && !key_esc_) {
        st_ = St::colon;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20 || key_.size() >= kMaxKey) return false;
      key_esc_ = !key_esc_ && c == '\\';
      key_ += c;
      return true;
    case St::colon:
      if (is_ws(c)) return true;
      if (c != ':') return false;
      st_ = St::value_start;
      return true;
    case St::value_start:
      if (is_ws(c)) return true;
      if (key_ == "name") {
        if (have_name_ || c != '"') return false;
        name_raw_ = "\"";
        name_esc_ = false;
        st_ = St::name_str;
        return true;
      }
      in_args_ = !have_args_ && (key_ == "arguments" || key_ == "parameters");
      scanner_ = JsonScanner();
      st_ = St::value;
      return value_byte(c);
    case St::name_str:
      if (static_cast<unsigned char>(c) < 0x20 || name_raw_.size() > kMaxName) return false;
      name_raw_ += c;
      if (c == '"' && !name_esc_) return name_done();
      name_esc_ = !name_esc_ && c == '\\';
      return true;
    case St::value:
      return value_byte(c);
    case St::after_member:
      if (is_ws(c)) return true;
      if (c == ',') {
        st_ = St::key;
        return true;
      }
      return c == '}' && end_object();
    case St::text:
    case St::after_call:
      break;
  }
  return false;
}

bool ToolCallParser::value_byte(char c) {
  const JsonScanner::Step s = scanner_.push(c);
  if (s == JsonScanner::Step::error) return false;
  if (in_args_ && s != JsonScanner::Step::ended_before) {
    if (have_name_) {
      emit(ToolCallDelta::Kind::arguments, std::string_view(&c, 1));
    } else {
      args_ += c;
    }
  }
  if (s == JsonScanner::Step::more) return true;
  if (in_args_) have_args_ = true;
  in_args_ = false;
  st_ = St::after_member;
  return s == JsonScanner::Step::done || call_byte(c);
}

bool ToolCallParser::name_done() {
  const auto v = nlohmann::json::parse(name_raw_, nullptr, /*allow_exceptions=*/false);
  if (!v.is_string()) return false;
  const std::string& name = v.get_ref<const std::string&>();
  if (std::find(setup_.names.begin(), setup_.names.end(), name) == setup_.names.end()) {
    return false;  // not one of the request's tools: not a call
  }
  have_name_ = true;
  pending_.clear();
  emit(ToolCallDelta::Kind::call, name);
  emit(ToolCallDelta::Kind::arguments, std::exchange(args_, {}));
  st_ = St::after_member;
  return true;
}

bool ToolCallParser::end_object() {
  if (!have_name_) return false;
  if (!have_args_) emit(ToolCallDelta::Kind::arguments, "{}");
  ++calls_;
  have_name_ = have_args_ = in_args_ = false;
  pending_.clear();
  tag_.clear();
  st_ = St::after_call;
  return true;
}

void ToolCallParser::to_text_after_call() {
  st_ = St::text;
  after_call_ = true;
  started_ = true;
  list_open_ = false;
}

// Between calls: true while the byte still belongs there (whitespace, a separator, the
// closing tag).
bool ToolCallParser::after_call_byte(char c) {
  switch (setup_.format) {
    case ToolCallFormat::hermes: {
      if (tag_.empty() && is_ws(c)) return true;
      tag_ += c;
      if (kHermesClose.starts_with(tag_)) {
        if (tag_.size() == kHermesClose.size()) {
          tag_.clear();
          to_text_after_call();
        }
        return true;
      }
      // No closing tag: the call stands, and what was read is text again.
      const std::string held = std::exchange(tag_, {});
      to_text_after_call();
      for (char h : held) step(h);
      return true;
    }
    case ToolCallFormat::llama3_json:
      if (is_ws(c)) return true;
      if (c != ';') return false;
      pending_ = ";";
      st_ = St::open;
      return true;
    case ToolCallFormat::mistral:
      if (is_ws(c)) return true;
      if (c == ',' && list_open_) {
        pending_ = ",";
        st_ = St::list_item;
        return true;
      }
      if (c == ']' && list_open_) {
        to_text_after_call();
        return true;
      }
      return false;
    case ToolCallFormat::none:
      break;
  }
  return false;
}

void ToolCallParser::fail(char c) {
  if (have_name_) {
    // The call was given out already: it ends here, with the arguments it has.
    if (!have_args_ && !in_args_) emit(ToolCallDelta::Kind::arguments, "{}");
    ++calls_;
    have_name_ = have_args_ = in_args_ = false;
    to_text_after_call();
  } else {
    // Not a call after all: everything it held is text, as written.
    pending_.pop_back();  // c, read again below
    st_ = St::text;
    list_open_ = false;
    content(pending_);
    started_ = true;
  }
  pending_.clear();
  text_byte(c);
}

void ParsedToolCalls::add(const std::vector<ToolCallDelta>& deltas) {
  for (const ToolCallDelta& d : deltas) {
    switch (d.kind) {
      case ToolCallDelta::Kind::content:
        content += d.text;
        break;
      case ToolCallDelta::Kind::call:
        calls.push_back({d.text, ""});
        break;
      case ToolCallDelta::Kind::arguments:
        calls.at(static_cast<size_t>(d.index)).arguments += d.text;
        break;
    }
  }
}

ParsedToolCalls parse_tool_calls(const ToolCallSetup& setup, std::string_view text) {
  ToolCallParser p(setup);
  ParsedToolCalls out;
  out.add(p.feed(text));
  out.add(p.finish());
  return out;
}

}  // namespace lift
