#include "server/openai_response.h"

#include <chrono>

#include "tokenizer/utf8.h"

namespace lift {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// vLLM's values: "abort" when the request was cut off (shutdown, client gone), "error" when
// the engine failed it.
const char* openai_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::length:
      return "length";
    case FinishReason::none:
      return nullptr;
    case FinishReason::abort:
      return "abort";
    case FinishReason::error:
      return "error";
    default:
      return "stop";
  }
}

json error_json(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  return {{"error",
           {{"message", sanitize_utf8(message)},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

ResponseBuilder::ResponseBuilder(const ApiRequest& req, const Tokenizer& tok, std::string id,
                                 std::string model)
    : req_(req),
      tok_(tok),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
  if (req_.chat && req_.tool_calls.format != ToolCallFormat::none) {
    parsers_.assign(static_cast<size_t>(req_.params.n), ToolCallParser(req_.tool_calls));
  }
}

json ResponseBuilder::base(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json ResponseBuilder::logprobs_json(const std::vector<TokenLogprobs>& lps,
                                    size_t& text_offset) const {
  auto piece = [&](int32_t t) { return std::string(tok_.token_to_piece(t)); };
  auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(c);
    return b;
  };
  if (req_.chat) {
    json content = json::array();
    for (const auto& lp : lps) {
      const std::string p = piece(lp.token);
      json top = json::array();
      for (const auto& t : lp.top) {
        const std::string tp = piece(t.token);
        top.push_back({{"token", sanitize_utf8(tp)}, {"logprob", t.logprob}, {"bytes", bytes(tp)}});
      }
      content.push_back({{"token", sanitize_utf8(p)},
                         {"logprob", lp.logprob},
                         {"bytes", bytes(p)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_lp = json::array(), top = json::array(),
       offsets = json::array();
  for (const auto& lp : lps) {
    const std::string p = sanitize_utf8(piece(lp.token));
    tokens.push_back(p);
    token_lp.push_back(lp.logprob);
    json alt = json::object();
    for (const auto& t : lp.top) alt[sanitize_utf8(piece(t.token))] = t.logprob;
    top.push_back(alt);
    offsets.push_back(text_offset);
    for (unsigned char c : p) text_offset += (c & 0xC0) != 0x80;  // code points, not bytes
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_lp},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json ResponseBuilder::role_chunk(int index) const {
  json c = base("chat.completion.chunk");
  c["choices"] = json::array({{{"index", index},
                               {"delta", {{"role", "assistant"}, {"content", ""}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}});
  return c;
}

namespace {

// One tool_calls entry of a chat delta: the call's first carries its id, type and name.
json tool_call_delta(const ToolCallDelta& d, ToolCallFormat f) {
  if (d.kind == ToolCallDelta::Kind::call) {
    return {{"index", d.index},
            {"id", new_tool_call_id(f)},
            {"type", "function"},
            {"function", {{"name", d.text}, {"arguments", ""}}}};
  }
  return {{"index", d.index}, {"function", {{"arguments", d.text}}}};
}

// A reply that called a tool and then stopped by itself finished to have the call run.
const char* with_calls(const char* finish, bool called) {
  return called && finish != nullptr && std::string_view(finish) == "stop" ? "tool_calls" : finish;
}

}  // namespace

// A chunk's logprobs go on from where the sample's previous chunk left its text offset.
json ResponseBuilder::stream_logprobs(const RequestOutput& out) {
  const size_t i = static_cast<size_t>(out.index);
  if (stream_offsets_.size() <= i) stream_offsets_.resize(i + 1, 0);
  return logprobs_json(out.logprobs, stream_offsets_[i]);
}

json ResponseBuilder::chunk(const RequestOutput& out) {
  const char* fr = openai_finish_reason(out.finish);
  json choice = {{"index", out.index},
                 {"logprobs", req_.params.logprobs && !out.logprobs.empty() ? stream_logprobs(out)
                                                                            : json(nullptr)},
                 {"finish_reason", fr ? json(fr) : json(nullptr)}};
  json c;
  if (req_.chat) {
    c = base("chat.completion.chunk");
    if (parsers_.empty()) {
      choice["delta"] = out.text.empty() && fr ? json::object() : json{{"content", out.text}};
    } else {
      ToolCallParser& p = parsers_.at(static_cast<size_t>(out.index));
      std::vector<ToolCallDelta> ds = p.feed(out.text);
      if (fr) {
        std::vector<ToolCallDelta> rest = p.finish();
        ds.insert(ds.end(), rest.begin(), rest.end());
      }
      std::string content;
      json calls = json::array();
      for (const ToolCallDelta& d : ds) {
        if (d.kind == ToolCallDelta::Kind::content) {
          content += d.text;
        } else if (d.kind == ToolCallDelta::Kind::arguments && !calls.empty() &&
                   calls.back()["index"] == d.index) {
          calls.back()["function"]["arguments"].get_ref<std::string&>() += d.text;
        } else {
          calls.push_back(tool_call_delta(d, req_.tool_calls.format));
        }
      }
      if (content.empty() && calls.empty() && !fr && choice["logprobs"].is_null()) return nullptr;
      json delta = json::object();
      if (!content.empty()) delta["content"] = content;
      if (!calls.empty()) delta["tool_calls"] = std::move(calls);
      choice["delta"] = std::move(delta);
      fr = with_calls(fr, p.calls() > 0);
      choice["finish_reason"] = fr ? json(fr) : json(nullptr);
    }
  } else {
    c = base("text_completion");
    choice["text"] = out.text;
  }
  c["choices"] = json::array({choice});
  return c;
}

json ResponseBuilder::usage_chunk(int prompt_tokens, int completion_tokens) const {
  json c = base(req_.chat ? "chat.completion.chunk" : "text_completion");
  c["choices"] = json::array();
  c["usage"] = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}};
  return c;
}

json ResponseBuilder::message(const SampleAccum& s, const char*& finish) const {
  if (parsers_.empty()) return {{"role", "assistant"}, {"content", s.text}};
  const ParsedToolCalls p = parse_tool_calls(req_.tool_calls, s.text);
  json m = {{"role", "assistant"},
            {"content", p.content.empty() && !p.calls.empty() ? json(nullptr) : json(p.content)}};
  if (p.calls.empty()) return m;
  json calls = json::array();
  for (const ParsedToolCall& c : p.calls) {
    calls.push_back({{"id", new_tool_call_id(req_.tool_calls.format)},
                     {"type", "function"},
                     {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  m["tool_calls"] = std::move(calls);
  finish = with_calls(finish, true);
  return m;
}

json ResponseBuilder::full(const std::vector<SampleAccum>& samples, int prompt_tokens) const {
  json r = base(req_.chat ? "chat.completion" : "text_completion");
  json choices = json::array();
  int completion = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const SampleAccum& s = samples[i];
    completion += s.completion_tokens;
    const char* fr = openai_finish_reason(s.finish);
    size_t offset = 0;
    json c = {
        {"index", i},
        {"logprobs", req_.params.logprobs ? logprobs_json(s.logprobs, offset) : json(nullptr)},
        {"finish_reason", fr ? json(fr) : json("stop")}};
    if (req_.chat) {
      c["message"] = message(s, fr);
      c["finish_reason"] = fr ? json(fr) : json("stop");
    } else {
      c["text"] = s.text;
    }
    choices.push_back(c);
  }
  r["choices"] = choices;
  r["usage"] = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion},
                {"total_tokens", prompt_tokens + completion}};
  return r;
}

}  // namespace lift
