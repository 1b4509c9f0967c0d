#include "server/openai_request.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <set>

#include "server/api_error.h"
#include "util/error.h"

namespace lift {

namespace {

using nlohmann::json;

std::string type_name(const json& v) { return v.type_name(); }

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError(400, msg, param);
}

double number(const json& v, const std::string& name, double lo, double hi) {
  if (!v.is_number()) bad(name, "'" + name + "' must be a number, got " + type_name(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    bad(name, "'" + name + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                  ", got " + v.dump());
  }
  return x;
}

int64_t integer(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(name, "'" + name + "' must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    bad(name, "'" + name + "' must be between " + std::to_string(lo) + " and " +
                  std::to_string(hi) + ", got " + std::to_string(x));
  }
  return x;
}

bool boolean(const json& v, const std::string& name) {
  if (!v.is_boolean()) bad(name, "'" + name + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}

std::string string_field(const json& v, const std::string& name) {
  if (!v.is_string()) bad(name, "'" + name + "' must be a string, got " + type_name(v));
  return v.get<std::string>();
}

bool present(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

// Fields that change the meaning of a request but that lift does not implement: refusing
// them is better than silently ignoring them.
void reject_unsupported(const json& body, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (!present(body, k)) continue;
    const json& v = body.at(k);
    const bool trivial =
        (v.is_boolean() && !v.get<bool>()) || (v.is_array() && v.empty()) ||
        (v.is_number() && std::string(k) == "best_of" && v.get<double>() == 1) ||
        (v.is_string() && v.get<std::string>().empty()) ||
        (v.is_string() && std::string(k) == "tool_choice" && v == "none") ||
        (v.is_object() && std::string(k) == "response_format" && v.value("type", "") == "text");
    if (!trivial) {
      std::string msg = "'";  // built step by step: g++ 12 warns falsely on a + chain here
      msg += k;
      msg += "' is not supported by lift";
      bad(k, msg);
    }
  }
}

void parse_common(const json& b, const ApiContext& ctx, ApiRequest& r) {
  RequestParams& p = r.params;
  // Checked but not used: lift serves its one model whatever the request names.
  if (present(b, "model")) string_field(b["model"], "model");
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
    if (!s.is_number_integer()) bad("seed", "'seed' must be an integer, got " + s.dump());
    p.sampling.seed =
        s.is_number_unsigned() ? s.get<uint64_t>() : static_cast<uint64_t>(s.get<int64_t>());
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
      bad("stop", "'stop' must be a string or an array of strings");
    }
    for (const auto& x : p.stop) {
      if (x.empty()) bad("stop", "stop strings must not be empty");
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
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(it.key(), &used);
        if (used != it.key().size()) id = -1;
      } catch (const std::exception&) {
        id = -1;
      }
      if (id < 0 || id >= ctx.vocab_size) {
        bad("logit_bias", "logit_bias key '" + it.key() + "' is not a token id in [0, " +
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
  if (present(b, "priority"))
    p.priority = static_cast<int>(integer(b["priority"], "priority", -1000000, 1000000));
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

}  // namespace

json parse_json_object(const std::string& body) {
  json b = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (b.is_discarded()) throw ApiError(400, "The request body is not valid JSON.");
  if (!b.is_object()) throw ApiError(400, "The request body must be a JSON object.");
  return b;
}

ApiRequest parse_completion_request(const std::string& body, const ApiContext& ctx) {
  const json b = parse_json_object(body);
  ApiRequest r;
  reject_unsupported(b, {"suffix", "echo", "best_of"});
  if (!present(b, "prompt")) bad("prompt", "'prompt' is required");
  const json& pr = b["prompt"];
  if (pr.is_string()) {
    r.prompt = ctx.tok.encode(pr.get<std::string>(), ctx.tok.vocab().add_bos(), false);
  } else if (pr.is_array() && !pr.empty() && pr[0].is_number()) {
    for (const json& t : pr) {
      r.prompt.push_back(static_cast<int32_t>(integer(t, "prompt", 0, ctx.vocab_size - 1)));
    }
  } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
    r.prompt = ctx.tok.encode(pr[0].get<std::string>(), ctx.tok.vocab().add_bos(), false);
  } else if (pr.is_array()) {
    bad("prompt",
        "batched prompts are not supported: send one prompt (a string or an array of "
        "token ids) per request");
  } else {
    bad("prompt", "'prompt' must be a string or an array of token ids");
  }
  if (r.prompt.empty()) r.prompt.push_back(ctx.tok.vocab().bos_id());
  parse_common(b, ctx, r);
  if (present(b, "logprobs")) {
    r.params.sampling.n_logprobs =
        static_cast<int>(integer(b["logprobs"], "logprobs", 0, kMaxLogprobs));
    r.params.logprobs = true;
  }
  finish_params(b, ctx, r, 16);
  return r;
}

ApiRequest parse_chat_request(const std::string& body, const ApiContext& ctx) {
  const json b = parse_json_object(body);
  ApiRequest r;
  r.chat = true;
  reject_unsupported(b, {"tools", "functions", "tool_choice", "function_call", "response_format",
                         "audio", "modalities", "prediction"});
  if (!present(b, "messages")) bad("messages", "'messages' is required");
  const json& ms = b["messages"];
  if (!ms.is_array() || ms.empty()) bad("messages", "'messages' must be a non-empty array");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < ms.size(); ++i) {
    const json& m = ms[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(where, where + " must be an object");
    if (!present(m, "role")) bad(where + ".role", where + " has no 'role'");
    ChatMessage cm;
    cm.role = string_field(m["role"], where + ".role");
    if (!present(m, "content")) bad(where + ".content", where + " has no 'content'");
    const json& c = m["content"];
    if (c.is_string()) {
      cm.content = c.get<std::string>();
    } else if (c.is_array()) {
      for (const json& part : c) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          bad(where + ".content", "only text content parts are supported");
        }
        cm.content += part["text"].get<std::string>();
      }
    } else {
      bad(where + ".content", where + ".content must be a string or an array of text parts");
    }
    messages.push_back(std::move(cm));
  }
  ChatPrompt cp;
  try {
    cp = build_chat_prompt(ctx.tok, ctx.chat_format, messages);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
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
  return r;
}

}  // namespace lift
