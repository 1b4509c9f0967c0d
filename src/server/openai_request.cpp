#include "server/openai_request.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/tool_request.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace lift {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Builds the DOM from SAX events, refusing (returning false, which stops the parser) to open a
// container deeper than kMaxJsonDepth: no value deeper than that is ever made. The parser
// itself is iterative, so the input's depth costs it no stack either.
template <typename json>
class BasicDepthLimitedBuilder : public json::json_sax_t {
 public:
  bool null() override { return put(nullptr) != nullptr; }
  bool boolean(bool v) override { return put(v) != nullptr; }
  bool number_integer(typename json::number_integer_t v) override { return put(v) != nullptr; }
  bool number_unsigned(typename json::number_unsigned_t v) override { return put(v) != nullptr; }
  bool number_float(typename json::number_float_t v, const typename json::string_t&) override {
    return put(v) != nullptr;
  }
  bool string(typename json::string_t& v) override { return put(std::move(v)) != nullptr; }
  bool binary(typename json::binary_t& v) override {
    return put(json::binary(std::move(v))) != nullptr;
  }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool key(typename json::string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    error_pos_ = position;
    overflow_ = e.id == 406;  // a number past double's range (1e99999): JSON, but unusable
    return false;
  }

  json& root() { return root_; }
  bool too_deep() const { return too_deep_; }
  size_t error_pos() const { return error_pos_; }
  bool overflow() const { return overflow_; }

 private:
  // Stores v where the parser is (the root, the next array element or the current key's
  // value) and returns it.
  json* put(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];  // a repeated key keeps its last value, as json::parse does
    slot = std::move(v);
    return &slot;
  }
  bool open(json container) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      too_deep_ = true;
      return false;
    }
    // Only the innermost container is ever modified, so pointers to its ancestors stay valid.
    stack_.push_back(put(std::move(container)));
    return true;
  }

  json root_;
  std::vector<json*> stack_;
  std::string key_;
  bool too_deep_ = false;
  size_t error_pos_ = 0;
  bool overflow_ = false;
};
using DepthLimitedBuilder = BasicDepthLimitedBuilder<json>;

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError(400, msg, param);
}

double number(const json& v, const std::string& name, double lo, double hi) {
  if (!v.is_number()) bad(name, "'" + name + "' must be a number, got " + describe_json(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    bad(name, "'" + name + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                  ", got " + describe_json(v));
  }
  return x;
}

// A float with a whole value (5.0, 3e0) counts as that integer, as pydantic's lax mode takes
// it for vLLM; what lies outside int64 is left to the range checks.
bool whole_float(const json& v) {
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

int64_t integer(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() && !whole_float(v)) {
    bad(name, "'" + name + "' must be an integer, got " + describe_json(v));
  }
  bool too_big = v.is_number_unsigned() &&
                 v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  int64_t x = 0;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    too_big = !(d >= -9.2e18 && d <= 9.2e18);
    if (!too_big) x = static_cast<int64_t>(d);
  } else if (!too_big) {
    x = v.get<int64_t>();
  }
  if (too_big || x < lo || x > hi) {
    bad(name, "'" + name + "' must be between " + std::to_string(lo) + " and " +
                  std::to_string(hi) + ", got " + describe_json(v));
  }
  return x;
}

bool boolean(const json& v, const std::string& name) {
  if (!v.is_boolean()) bad(name, "'" + name + "' must be true or false, got " + describe_json(v));
  return v.get<bool>();
}

std::string string_field(const json& v, const std::string& name) {
  if (!v.is_string()) bad(name, "'" + name + "' must be a string, got " + describe_json(v));
  return v.get<std::string>();
}

bool present(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

// obj[key] when obj is an object holding a string there, else nullptr (json::value() would
// throw for a value of another type).
const std::string* string_member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return nullptr;
  return &it->get_ref<const std::string&>();
}

// Tokenizer failures (a vocabulary that cannot encode some character) become a 400 on `param`.
std::vector<int32_t> encode(const Tokenizer& tok, const std::string& text, bool add_bos,
                            bool parse_special, const char* param) {
  try {
    return tok.encode(text, add_bos, parse_special);
  } catch (const Error& e) {
    bad(param, e.what());
  }
}

// Fields that change the meaning of a request but that lift does not implement: refusing
// them is better than silently ignoring them.
void reject_unsupported(const json& body, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (!present(body, k)) continue;
    const json& v = body.at(k);
    const std::string_view key = k;
    const std::string* type = string_member(v, "type");
    const bool trivial =
        (v.is_boolean() && !v.get<bool>()) || (v.is_array() && v.empty()) ||
        (v.is_number() && key == "best_of" && v.get<double>() == 1) ||
        (v.is_string() && v.get_ref<const std::string&>().empty()) ||
        (v.is_string() && key == "tool_choice" && v.get_ref<const std::string&>() == "none") ||
        (v.is_object() && key == "response_format" && type && *type == "text");
    if (!trivial) {
      std::string msg = "'";  // built step by step: g++ 12 warns falsely on a + chain here
      msg += k;
      msg += "' is not supported by lift";
      bad(k, msg);
    }
  }
}

void check_model(const json& b, const ApiContext& ctx) {
  if (!present(b, "model")) return;
  const std::string name = string_field(b["model"], "model");
  const auto& names = ctx.served_model_names;
  if (names.empty() || std::find(names.begin(), names.end(), name) != names.end()) return;
  throw ApiError(404, "The model `" + excerpt(name) + "` does not exist.", "model",
                 "invalid_request_error", "model_not_found");
}

void parse_common(const json& b, const ApiContext& ctx, ApiRequest& r) {
  RequestParams& p = r.params;
  check_model(b, ctx);
  if (present(b, "temperature"))
    p.sampling.temperature = static_cast<float>(number(b["temperature"], "temperature", 0, 2));
  if (present(b, "top_p")) {
    p.sampling.top_p = static_cast<float>(number(b["top_p"], "top_p", 0, 1));
    if (p.sampling.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  }
  if (present(b, "top_k")) {
    const int64_t k = integer(b["top_k"], "top_k", -1, ctx.vocab_size);
    p.sampling.top_k = k < 0 ? 0 : static_cast<int>(k);
  }
  if (present(b, "min_p")) p.sampling.min_p = static_cast<float>(number(b["min_p"], "min_p", 0, 1));
  if (present(b, "presence_penalty")) {
    p.sampling.presence_penalty =
        static_cast<float>(number(b["presence_penalty"], "presence_penalty", -2, 2));
  }
  if (present(b, "frequency_penalty")) {
    p.sampling.frequency_penalty =
        static_cast<float>(number(b["frequency_penalty"], "frequency_penalty", -2, 2));
  }
  if (present(b, "repetition_penalty")) {
    p.sampling.repetition_penalty =
        static_cast<float>(number(b["repetition_penalty"], "repetition_penalty", 0, 10));
    if (p.sampling.repetition_penalty <= 0)
      bad("repetition_penalty", "'repetition_penalty' must be > 0");
  }
  if (present(b, "seed")) {
    const json& s = b["seed"];
    if (whole_float(s)) {
      // Beyond 2^64 JSON parsers hand over a double: an integer still, but out of range.
      p.sampling.seed = static_cast<uint64_t>(integer(
          s, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    } else if (!s.is_number_integer()) {
      bad("seed", "'seed' must be an integer, got " + describe_json(s));
    } else {
      p.sampling.seed =
          s.is_number_unsigned() ? s.get<uint64_t>() : static_cast<uint64_t>(s.get<int64_t>());
    }
  } else {
    static std::atomic<uint64_t> counter{0x9e3779b97f4a7c15ULL};
    p.sampling.seed =
        counter.fetch_add(0x9e3779b97f4a7c15ULL) ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  if (present(b, "n")) p.n = static_cast<int>(integer(b["n"], "n", 1, 16));
  if (present(b, "ignore_eos")) p.ignore_eos = boolean(b["ignore_eos"], "ignore_eos");
  if (present(b, "min_tokens"))
    p.min_tokens = static_cast<int>(integer(b["min_tokens"], "min_tokens", 0, ctx.context_length));
  if (present(b, "stop")) {
    const json& s = b["stop"];
    if (s.is_string()) {
      p.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > 16) bad("stop", "'stop' may hold at most 16 strings");
      for (const json& e : s) p.stop.push_back(string_field(e, "stop"));
    } else {
      bad("stop", "'stop' must be a string or an array of strings, got " + describe_json(s));
    }
    for (const auto& x : p.stop) {
      if (x.empty()) bad("stop", "stop strings must not be empty");
      if (x.size() > 256) {
        bad("stop", "stop strings must be at most 256 bytes; one has " + std::to_string(x.size()) +
                        " (starting " + excerpt(x) + ")");
      }
    }
  }
  if (present(b, "stop_token_ids")) {
    const json& s = b["stop_token_ids"];
    if (!s.is_array()) bad("stop_token_ids", "'stop_token_ids' must be an array of integers");
    for (const json& e : s) {
      p.stop_token_ids.push_back(
          static_cast<int32_t>(integer(e, "stop_token_ids", 0, ctx.vocab_size - 1)));
    }
  }
  if (present(b, "logit_bias")) {
    const json& lb = b["logit_bias"];
    if (!lb.is_object())
      bad("logit_bias", "'logit_bias' must be an object mapping token ids to biases");
    for (auto it = lb.begin(); it != lb.end(); ++it) {
      const std::string& key = it.key();
      int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= ctx.vocab_size) {
        bad("logit_bias", "logit_bias key \"" + excerpt(key) + "\" is not a token id in [0, " +
                              std::to_string(ctx.vocab_size - 1) + "]");
      }
      p.sampling.logit_bias.push_back(
          {static_cast<int32_t>(id),
           static_cast<float>(number(it.value(), "logit_bias", -100, 100))});
    }
  }
  if (present(b, "stream")) r.stream = boolean(b["stream"], "stream");
  if (present(b, "stream_options")) {
    const json& so = b["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (present(so, "include_usage"))
      r.include_usage = boolean(so["include_usage"], "stream_options.include_usage");
  }
  if (present(b, "user")) string_field(b["user"], "user");
  if (present(b, "priority")) {
    p.priority = static_cast<int>(integer(b["priority"], "priority", -1000000, 1000000));
    if (p.priority != 0 && !ctx.allow_priority) {
      bad("priority",
          "'priority' is only honoured when the server schedules by priority: start it with "
          "--scheduling-policy priority, or leave 'priority' out (or 0)");
    }
  }
  // lift's extension: how many draft tokens speculative decoding may verify per step for this
  // request (-1: the server's --spec-tokens; 0: none). Greedy output is the same either way.
  if (present(b, "spec_tokens")) {
    p.spec_tokens = static_cast<int>(integer(b["spec_tokens"], "spec_tokens", -1, kMaxSpecTokens));
  }
}

void finish_params(const json& b, const ApiContext& ctx, ApiRequest& r, int default_max) {
  RequestParams& p = r.params;
  const int room = ctx.context_length - static_cast<int>(r.prompt.size());
  if (room <= 0) {
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(ctx.context_length) +
                       " tokens, but the prompt has " + std::to_string(r.prompt.size()) +
                       " tokens. Shorten the prompt.",
                   r.chat ? "messages" : "prompt", "invalid_request_error",
                   "context_length_exceeded");
  }
  const char* key = present(b, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (present(b, key)) {
    p.max_tokens = static_cast<int>(integer(b[key], key, 1, 1 << 30));
    if (p.max_tokens > room) {
      throw ApiError(400,
                     "This model's maximum context length is " +
                         std::to_string(ctx.context_length) + " tokens. However, you requested " +
                         std::to_string(r.prompt.size() + static_cast<size_t>(p.max_tokens)) +
                         " tokens (" + std::to_string(r.prompt.size()) + " in the prompt, " +
                         std::to_string(p.max_tokens) + " for the completion). Lower " + key + ".",
                     key, "invalid_request_error", "context_length_exceeded");
    }
  } else {
    p.max_tokens = std::min(default_max, room);
  }
  if (p.min_tokens > p.max_tokens) bad("min_tokens", "'min_tokens' must not exceed max_tokens");
  if (const std::string err = p.validate(ctx.vocab_size); !err.empty()) bad("", err);
}

// Structured output: read from the body and compiled here, on the HTTP thread; the engine
// only runs the result (params.constraint).
void parse_constraint(const json& b, const std::string& body, const ApiContext& ctx,
                      ApiRequest& r) {
  if (auto c = parse_constraint_fields(b, body)) {
    if (r.constraint) {
      bad(c->param, "'" + c->param + "' cannot be combined with '" + r.constraint->param +
                        "': a request may give one output constraint");
    }
    r.constraint = std::move(c);
  }
  if (!r.constraint) return;
  if (ctx.constraints == nullptr) {
    bad(r.constraint->param, "structured output is not available here");
  }
  r.params.constraint = compile_constraint(*ctx.constraints, *r.constraint);
}

// One chat message's content: a string or an array of text parts.
std::string message_content(const json& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) {
    bad(where, where + " must be a string or an array of text parts, got " + describe_json(c));
  }
  std::string content;
  for (size_t j = 0; j < c.size(); ++j) {
    const json& part = c[j];
    const std::string at = where + "[" + std::to_string(j) + "]";
    const std::string* type = string_member(part, "type");
    if (!type) bad(at, at + " must be an object {\"type\": \"text\", \"text\": \"...\"}");
    if (*type != "text") {
      bad(at, at + " has type \"" + excerpt(*type) + "\"; only text content parts are supported");
    }
    const std::string* text = string_member(part, "text");
    if (!text) bad(at, at + " has type \"text\" but no string 'text'");
    content += *text;
  }
  return content;
}

}  // namespace

std::string describe_json(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return "the string \"" + excerpt(v.get_ref<const std::string&>()) + "\"";
    case json::value_t::array:
      if (v.empty()) return "an empty array";
      return "an array of " + std::to_string(v.size()) + (v.size() == 1 ? " element" : " elements");
    case json::value_t::object:
      if (v.empty()) return "an empty object";
      return "an object with " + std::to_string(v.size()) + (v.size() == 1 ? " key" : " keys");
    case json::value_t::binary:
      return "binary data";
    case json::value_t::discarded:
      return "nothing";
    case json::value_t::null:
    case json::value_t::boolean:
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return v.dump();  // a scalar: at most a few dozen bytes
  }
  return v.type_name();
}

json parse_json_object(std::string_view body) {
  DepthLimitedBuilder b;
  if (!json::sax_parse(body.data(), body.data() + body.size(), &b)) {
    if (b.too_deep()) {
      throw ApiError(400, "The request body nests arrays and objects more than " +
                              std::to_string(kMaxJsonDepth) +
                              " levels deep; no OpenAI request needs that many.");
    }
    if (body.empty()) throw ApiError(400, "The request body is empty; send a JSON object.");
    // The parser counts the end of input as a byte read: name the last real one at most.
    const std::string at =
        std::to_string(std::min(b.error_pos(), body.size())) + " of " + std::to_string(body.size());
    if (b.overflow()) {
      throw ApiError(400,
                     "The request body has a number too large to represent (at byte " + at + ").");
    }
    throw ApiError(400, "The request body is not valid JSON (error at byte " + at + ").");
  }
  if (!b.root().is_object()) {
    throw ApiError(400,
                   "The request body must be a JSON object, got " + describe_json(b.root()) + ".");
  }
  return std::move(b.root());
}

namespace {

// The body once more with its keys in order, for what a template sees (parse_json_object
// has already checked it).
ordered_json parse_ordered_json(std::string_view body) {
  BasicDepthLimitedBuilder<ordered_json> b;
  if (!ordered_json::sax_parse(body.data(), body.data() + body.size(), &b)) {
    throw ApiError(400, "The request body is not valid JSON.");
  }
  return std::move(b.root());
}

}  // namespace

ApiRequest parse_completion_request(const std::string& body, const ApiContext& ctx) {
  const json b = parse_json_object(body);
  ApiRequest r;
  reject_unsupported(b, {"suffix", "echo", "best_of"});
  if (!present(b, "prompt")) bad("prompt", "'prompt' is required");
  const json& pr = b["prompt"];
  const bool add_bos = ctx.tok.vocab().add_bos();
  if (pr.is_string()) {
    r.prompt = encode(ctx.tok, pr.get_ref<const std::string&>(), add_bos, false, "prompt");
  } else if (pr.is_array() && pr.empty()) {
    bad("prompt", "'prompt' must not be an empty array");
  } else if (pr.is_array() && pr[0].is_number()) {
    r.prompt.reserve(pr.size());
    for (const json& t : pr) {
      r.prompt.push_back(static_cast<int32_t>(integer(t, "prompt", 0, ctx.vocab_size - 1)));
    }
  } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
    r.prompt = encode(ctx.tok, pr[0].get_ref<const std::string&>(), add_bos, false, "prompt");
  } else if (pr.is_array() && (pr[0].is_string() || pr[0].is_array())) {
    bad("prompt",
        "batched prompts are not supported: send one prompt (a string or an array of "
        "token ids) per request");
  } else {
    bad("prompt", "'prompt' must be a string or an array of token ids, got " + describe_json(pr));
  }
  if (r.prompt.empty()) {
    const int32_t bos = ctx.tok.vocab().bos_id();
    if (bos < 0) bad("prompt", "'prompt' is empty and the model has no BOS token to start from");
    r.prompt.push_back(bos);
  }
  parse_common(b, ctx, r);
  if (present(b, "logprobs")) {
    r.params.sampling.n_logprobs =
        static_cast<int>(integer(b["logprobs"], "logprobs", 0, kMaxLogprobs));
    r.params.logprobs = true;
  }
  finish_params(b, ctx, r, 16);
  parse_constraint(b, body, ctx, r);
  return r;
}

namespace {

// One tool call of an assistant message (c: validated; oc: the same value with its keys in
// the client's order). Arguments sent as a JSON string (OpenAI's wire format) become the
// object templates expect (Llama 3.1 and Mistral write them with tojson), as vLLM does.
ordered_json tool_call(const json& c, const ordered_json& oc, const std::string& where) {
  if (!c.is_object()) bad(where, where + " must be an object, got " + describe_json(c));
  ordered_json out = oc;
  const auto f = c.find("function");
  if (f == c.end() || !f->is_object()) bad(where, where + " needs a 'function' object");
  if (!string_member(*f, "name")) {
    bad(where + ".function.name", where + ".function needs a string 'name'");
  }
  const auto args = f->find("arguments");
  if (args != f->end() && args->is_string()) {
    BasicDepthLimitedBuilder<ordered_json> b;
    const std::string& text = args->get_ref<const std::string&>();
    if (ordered_json::sax_parse(text.data(), text.data() + text.size(), &b) &&
        b.root().is_object()) {
      out["function"]["arguments"] = std::move(b.root());
    }
  }
  return out;
}

ordered_json chat_message(const json& m, const ordered_json& om, const std::string& where) {
  if (!m.is_object()) bad(where, where + " must be an object, got " + describe_json(m));
  if (!present(m, "role")) bad(where + ".role", where + " has no 'role'");
  ordered_json out = om;
  // OpenAI's roles; "developer" (OpenAI's newer name for system) reaches templates, which
  // do not know it, as "system".
  const std::string role = string_field(m["role"], where + ".role");
  if (role == "developer") {
    out["role"] = "system";
  } else if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
    bad(where + ".role", where + " has unsupported role '" + excerpt(role) +
                             "' (expected system, developer, user, assistant or tool)");
  }
  const bool has_calls = present(m, "tool_calls");
  if (has_calls) {
    const json& calls = m["tool_calls"];
    if (!calls.is_array()) bad(where + ".tool_calls", where + ".tool_calls must be an array");
    ordered_json list = ordered_json::array();
    for (size_t j = 0; j < calls.size(); ++j) {
      const std::string at = where + ".tool_calls[" + std::to_string(j) + "]";
      list.push_back(tool_call(calls[j], om["tool_calls"][j], at));
    }
    out["tool_calls"] = std::move(list);
  }
  if (present(m, "content")) {
    out["content"] = message_content(m["content"], where + ".content");
  } else if (has_calls || m.contains("content")) {
    // null (what OpenAI's SDKs send back for a turn that only called tools), or no content
    // beside tool calls: the empty string, as vLLM gives string-content templates, which
    // would otherwise fail on None + str.
    out["content"] = "";
  } else {
    bad(where + ".content", where + " has no 'content'");
  }
  for (const char* k : {"name", "tool_call_id", "reasoning_content"}) {
    if (present(m, k)) string_field(m[k], where + "." + k);
  }
  return out;
}

// b: the body; ob: the same body with its objects' keys in the client's order.
ChatInput parse_chat_input(const json& b, const ordered_json& ob) {
  ChatInput in;
  if (!present(b, "messages")) bad("messages", "'messages' is required");
  const json& ms = b["messages"];
  if (!ms.is_array() || ms.empty()) {
    bad("messages", "'messages' must be a non-empty array, got " + describe_json(ms));
  }
  for (size_t i = 0; i < ms.size(); ++i) {
    in.messages.push_back(
        chat_message(ms[i], ob["messages"][i], "messages[" + std::to_string(i) + "]"));
  }
  if (present(b, "tools")) {
    if (!b["tools"].is_array())
      bad("tools", "'tools' must be an array, got " + describe_json(b["tools"]));
    for (size_t i = 0; i < b["tools"].size(); ++i) {
      if (!b["tools"][i].is_object()) {
        bad("tools", "tools[" + std::to_string(i) + "] must be an object");
      }
    }
    in.tools = ob["tools"];
  }
  if (present(b, "add_generation_prompt")) {
    in.add_generation_prompt = boolean(b["add_generation_prompt"], "add_generation_prompt");
  }
  if (present(b, "continue_final_message")) {
    in.continue_final_message = boolean(b["continue_final_message"], "continue_final_message");
    if (in.continue_final_message && in.add_generation_prompt) {
      bad("continue_final_message",
          "'continue_final_message' and 'add_generation_prompt' cannot both be true (set "
          "'add_generation_prompt': false to continue the last assistant message)");
    }
  }
  if (present(b, "chat_template")) {
    // vLLM takes one only from servers started to trust it: a template is code the server runs.
    bad("chat_template",
        "a per-request 'chat_template' is not accepted; start lift serve with --chat-template");
  }
  if (present(b, "chat_template_kwargs")) {
    if (!b["chat_template_kwargs"].is_object()) {
      bad("chat_template_kwargs", "'chat_template_kwargs' must be an object, got " +
                                      describe_json(b["chat_template_kwargs"]));
    }
    in.kwargs = ob["chat_template_kwargs"];
  }
  return in;
}

}  // namespace

ChatInput parse_chat_input(std::string_view body) {
  return parse_chat_input(parse_json_object(body), parse_ordered_json(body));
}

// A template that refuses the conversation (raise_exception) or fails on it is the
// request's problem: 400 with the template's message.
ChatPrompt render_chat_request(const ApiContext& ctx, const ChatInput& in) {
  try {
    return build_chat_prompt(ctx.tok, ctx.chat, in);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
}

std::string render_chat_text(const ApiContext& ctx, const ChatInput& in) {
  try {
    return render_chat_prompt(ctx.tok, ctx.chat, in);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
}

ApiRequest parse_chat_request(const std::string& body, const ApiContext& ctx) {
  const json b = parse_json_object(body);
  ApiRequest r;
  r.chat = true;
  reject_unsupported(b, {"functions", "function_call", "audio", "modalities", "prediction"});
  ChatInput in = parse_chat_input(b, parse_ordered_json(body));
  const ToolRequest tools = parse_tool_request(b, in.tools);
  if (tools.choice == ToolChoice::none) in.tools = nullptr;  // "none": the model sees no tools
  ChatPrompt cp = render_chat_request(ctx, in);
  r.prompt = std::move(cp.tokens);
  parse_common(b, ctx, r);
  r.params.stop_token_ids.insert(r.params.stop_token_ids.end(), cp.stop_token_ids.begin(),
                                 cp.stop_token_ids.end());
  r.params.stop.insert(r.params.stop.end(), cp.stop.begin(), cp.stop.end());
  if (present(b, "logprobs")) r.params.logprobs = boolean(b["logprobs"], "logprobs");
  if (present(b, "top_logprobs")) {
    r.params.sampling.n_logprobs =
        static_cast<int>(integer(b["top_logprobs"], "top_logprobs", 0, kMaxLogprobs));
    if (!r.params.logprobs) bad("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  }
  finish_params(b, ctx, r, ctx.context_length);
  parse_constraint(b, body, ctx, r);
  apply_tool_request(tools, ctx, r);
  return r;
}

TokenizeRequest parse_tokenize_request(const std::string& body) {
  const json b = parse_json_object(body);
  TokenizeRequest r;
  if (b.contains("messages")) {
    r.chat = parse_chat_input(b, parse_ordered_json(body));
    r.add_special = false;
  } else {
    const char* field = b.contains("prompt") ? "prompt" : "content";
    const auto text = b.find(field);
    if (text == b.end()) bad("prompt", "'prompt' (the text to tokenize) or 'messages' is required");
    if (!text->is_string()) {
      bad(field, std::string("'") + field + "' must be a string, got " + describe_json(*text));
    }
    r.text = text->get<std::string>();
  }
  for (const char* k : {"add_special_tokens", "add_special"}) {
    if (b.contains(k)) r.add_special = boolean(b[k], k);
  }
  return r;
}

std::vector<int32_t> tokenize(const Tokenizer& tok, const TokenizeRequest& req) {
  return encode(tok, req.text, req.add_special && tok.vocab().add_bos(), req.add_special, "prompt");
}

std::vector<int32_t> tokenize(const ApiContext& ctx, const TokenizeRequest& req) {
  if (!req.chat) return tokenize(ctx.tok, req);
  const std::string text = render_chat_text(ctx, *req.chat);
  return encode(ctx.tok, text, req.add_special && ctx.tok.vocab().add_bos(), true, "messages");
}

DetokenizeRequest parse_detokenize_request(const std::string& body, int vocab_size) {
  const json b = parse_json_object(body);
  const auto tokens = b.find("tokens");
  if (tokens == b.end() || !tokens->is_array()) {
    bad("tokens", "'tokens' must be an array of token ids, got " +
                      (tokens == b.end() ? std::string("nothing") : describe_json(*tokens)));
  }
  DetokenizeRequest r;
  r.tokens.reserve(tokens->size());
  for (const json& t : *tokens) {
    r.tokens.push_back(static_cast<int32_t>(integer(t, "tokens", 0, int64_t{vocab_size} - 1)));
  }
  return r;
}

}  // namespace lift
