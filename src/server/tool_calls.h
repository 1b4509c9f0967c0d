// Tool calls in model output: the syntax each model family was trained to write, parsed into
// OpenAI's tool_calls, whole or streamed.
//
//   llama3_json  Llama 3.1: the reply is {"name": ..., "parameters": {...}} (optionally after
//                <|python_tag|>), several separated by ';'; only at the start of the reply.
//   hermes       Hermes / Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
//                any number, anywhere; text before them stays content.
//   mistral      Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]. [TOOL_CALLS]
//                is a control token that decoded text leaves out, so a reply that starts with
//                the bare array is read the same way.
//
// The parser reads the text one byte at a time and gives out only what the bytes so far
// decide, so any chunking of a text gives the same content and calls (parse_tool_calls is
// the parser fed the whole text at once). A call counts only when its name is one of the
// request's tools; until the name is known the call's bytes are held back, and if what
// follows is not a call after all (bad JSON, no name, an unknown name) they are content, as
// written. A call's arguments are the JSON value the model wrote, byte for byte, passed on
// as it arrives; the scanner checks that they stay well-formed JSON, and a call cut short
// (bad JSON after its name, or the end of the text) keeps the arguments written until then.
// Whitespace next to a call is not content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/json_scanner.h"

namespace lift {

enum class ToolCallFormat { none, llama3_json, hermes, mistral };

std::string_view tool_call_format_name(ToolCallFormat f);
// "llama3_json", "hermes", "mistral" or "none"; throws lift::Error listing them.
ToolCallFormat parse_tool_call_format(std::string_view name);
// The syntax a chat template teaches its model, from what the template writes: <tool_call>
// (hermes), [TOOL_CALLS] (mistral), <|python_tag|> or "parameters" in a Llama 3 header
// template (llama3_json); hermes for any other template, the most common syntax.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// A fresh id for a call, in the shape the format's templates take back in tool messages:
// Mistral's templates require 9 letters and digits; others get "call_" and 24 of them.
std::string new_tool_call_id(ToolCallFormat f);

// What the request's output is parsed for: format none parses nothing.
struct ToolCallSetup {
  ToolCallFormat format = ToolCallFormat::none;
  std::vector<std::string> names;  // the functions the model may call
};

struct ToolCallDelta {
  enum class Kind { content, call, arguments };
  Kind kind = Kind::content;
  int index = -1;    // the call's index (call, arguments)
  std::string text;  // content text, the call's name, or a piece of its arguments
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallSetup setup);
  // The next piece of output; returns what it decided, in order.
  std::vector<ToolCallDelta> feed(std::string_view text);
  // The output ended: what was held back.
  std::vector<ToolCallDelta> finish();
  int calls() const { return calls_; }

 private:
  enum class St {
    text,          // content
    open,          // after a start marker or a separator: the call's opener
    list_item,     // mistral, inside the list: '{'
    key_or_end,    // after '{'
    key,           // after ',' in the call object
    key_str,       // inside a key
    colon,         // after a key
    value_start,   // after ':'
    name_str,      // inside the name's string
    value,         // inside another member's value
    after_member,  // ',' or '}'
    after_call,    // hermes: </tool_call>; llama3_json: ';'; mistral: ',' or ']'
  };

  void step(char c);
  void text_byte(char c);
  bool call_byte(char c);
  bool value_byte(char c);
  bool after_call_byte(char c);
  void fail(char c);
  bool marker_allowed(char c) const;
  const std::string* marker_for(std::string_view held) const;
  std::string take_ws();
  void begin_object();
  bool name_done();
  bool end_object();
  void to_text_after_call();
  void content(std::string_view s);
  void content_byte(char c);
  void emit(ToolCallDelta::Kind kind, std::string_view text);

  ToolCallSetup setup_;
  std::vector<std::string> markers_;  // start markers of this format
  std::vector<ToolCallDelta> out_;
  St st_ = St::text;
  bool started_ = false;     // content was given out, or an attempt ended: no longer at the start
  bool after_call_ = false;  // the last thing given out was a call
  std::string ws_;           // whitespace held in text
  std::string partial_;      // a marker's prefix held in text
  std::string pending_;      // an attempt's bytes, content if it turns out not to be a call
  bool list_open_ = false;   // mistral: inside the '[' list
  std::string key_;
  bool key_esc_ = false;
  std::string name_raw_;  // the name's JSON string as written
  bool name_esc_ = false;
  bool have_name_ = false;  // the call was given out
  bool in_args_ = false;    // the value being read is the arguments
  bool have_args_ = false;
  std::string args_;  // arguments read before the name
  JsonScanner scanner_;
  std::string tag_;  // hermes: the prefix of </tool_call> read so far
  int calls_ = 0;
};

struct ParsedToolCall {
  std::string name;
  std::string arguments;
};
struct ParsedToolCalls {
  std::string content;
  std::vector<ParsedToolCall> calls;
  void add(const std::vector<ToolCallDelta>& deltas);
};
ParsedToolCalls parse_tool_calls(const ToolCallSetup& setup, std::string_view text);

}  // namespace lift
