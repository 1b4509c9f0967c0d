#include "server/tool_request.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "structured/constraint.h"

namespace lift {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
namespace st = structured;

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError(400, msg, param);
}

bool present(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

// OpenAI's rule for function names; it also makes "<name>" a JSON string literal as is.
bool valid_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string check_tool(const json& t, const std::string& at) {
  if (!t.is_object()) bad("tools", at + " must be an object, got " + describe_json(t));
  const auto type = t.find("type");
  if (type == t.end() || *type != "function") {
    bad("tools", at + " must have \"type\": \"function\" (the only kind of tool lift runs)");
  }
  const auto f = t.find("function");
  if (f == t.end() || !f->is_object()) bad("tools", at + " needs a 'function' object");
  const auto name = f->find("name");
  if (name == f->end() || !name->is_string()) {
    bad("tools", at + ".function needs a string 'name'");
  }
  const std::string& n = name->get_ref<const std::string&>();
  if (!valid_name(n)) {
    bad("tools", at + ".function.name \"" + excerpt(n) +
                     "\" must be 1 to 64 letters, digits, underscores or dashes");
  }
  if (present(*f, "description") && !(*f)["description"].is_string()) {
    bad("tools", at + ".function.description must be a string");
  }
  if (present(*f, "parameters") && !(*f)["parameters"].is_object()) {
    bad("tools", at + ".function.parameters must be a JSON Schema object, got " +
                     describe_json((*f)["parameters"]));
  }
  if (present(*f, "strict") && !(*f)["strict"].is_boolean()) {
    bad("tools", at + ".function.strict must be true or false");
  }
  return n;
}

ToolChoice parse_choice(const json& tc, std::string& named) {
  if (tc.is_string()) {
    const std::string& s = tc.get_ref<const std::string&>();
    if (s == "none") return ToolChoice::none;
    if (s == "auto") return ToolChoice::automatic;
    if (s == "required") return ToolChoice::required;
  } else if (tc.is_object()) {
    const auto f = tc.find("function");
    const auto type = tc.find("type");
    if (type != tc.end() && *type == "function" && f != tc.end() && f->is_object()) {
      const auto n = f->find("name");
      if (n != f->end() && n->is_string()) {
        named = n->get<std::string>();
        return ToolChoice::named;
      }
    }
  }
  bad("tool_choice",
      "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
      "\"function\": {\"name\": ...}}, got " +
          describe_json(tc));
}

// The tool's parameters schema; none means the function takes no arguments: {}.
ordered_json parameters_of(const ordered_json& tool) {
  const ordered_json& f = tool.at("function");
  const auto p = f.find("parameters");
  if (p != f.end() && !p->is_null()) return *p;
  return {
      {"type", "object"}, {"properties", ordered_json::object()}, {"additionalProperties", false}};
}

bool strict_of(const ordered_json& tool) {
  const ordered_json& f = tool.at("function");
  const auto s = f.find("strict");
  return s != f.end() && s->is_boolean() && s->get<bool>();
}

// Recently compiled tool grammars, shared by every request with the same tools and choice
// (clients send the same tools with every turn of a conversation).
class GrammarCache {
 public:
  std::shared_ptr<const st::CompiledGrammar> get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  // Bounded in bytes as well as entries: the tools are request input (ConstraintCompiler).
  void put(std::string key, std::shared_ptr<const st::CompiledGrammar> g) {
    const size_t size = g->bytes();
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(key) || size > kMaxBytes) return;
    lru_.emplace_front(key, std::move(g));
    index_.emplace(std::move(key), lru_.begin());
    bytes_ += size;
    while (lru_.size() > kCapacity || bytes_ > kMaxBytes) {
      bytes_ -= lru_.back().second->bytes();
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }

 private:
  static constexpr size_t kCapacity = 32;
  static constexpr size_t kMaxBytes = size_t{256} << 20;
  size_t bytes_ = 0;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const st::CompiledGrammar>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

GrammarCache& cache() {
  static GrammarCache c;
  return c;
}

}  // namespace

std::vector<std::string> ToolRequest::callable() const {
  if (choice == ToolChoice::named) return {named};
  return names;
}

ToolRequest parse_tool_request(const json& body, const ordered_json& tools) {
  ToolRequest r;
  if (present(body, "tools")) {
    const json& ts = body["tools"];
    if (!ts.is_array()) bad("tools", "'tools' must be an array, got " + describe_json(ts));
    for (size_t i = 0; i < ts.size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      std::string n = check_tool(ts[i], at);
      if (std::find(r.names.begin(), r.names.end(), n) != r.names.end()) {
        bad("tools", at + " names the function \"" + n + "\" a second time");
      }
      r.names.push_back(std::move(n));
    }
    if (!r.names.empty()) r.tools = tools;
  }
  if (present(body, "tool_choice")) r.choice = parse_choice(body["tool_choice"], r.named);
  if (r.constrained() && r.names.empty()) {
    bad("tool_choice", "'tool_choice' asks for a tool call, but the request has no 'tools'");
  }
  if (r.choice == ToolChoice::named &&
      std::find(r.names.begin(), r.names.end(), r.named) == r.names.end()) {
    bad("tool_choice", "'tool_choice' names the function \"" + excerpt(r.named) +
                           "\", which is not one of the request's tools");
  }
  if (present(body, "parallel_tool_calls")) {
    const json& p = body["parallel_tool_calls"];
    if (!p.is_boolean()) bad("parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    r.parallel = p.get<bool>();
  }
  return r;
}

st::Grammar tool_call_grammar(const ToolRequest& r, ToolCallFormat f,
                              const st::JsonSchemaOptions& opt) {
  st::GrammarBuilder b;
  const std::string args_key = f == ToolCallFormat::llama3_json ? "parameters" : "arguments";
  const std::vector<std::string> allowed = r.callable();
  std::vector<st::ExprId> calls;
  for (size_t i = 0; i < r.names.size(); ++i) {
    const std::string& name = r.names[i];
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) continue;
    const ordered_json& tool = r.tools.at(i);
    st::JsonSchemaOptions o = opt;
    o.strict = o.strict || strict_of(tool);
    st::RuleId args = -1;
    try {
      args = st::compile_json_schema(parameters_of(tool), b, o);
    } catch (const st::GrammarError& e) {
      throw st::GrammarError("the parameters of tool \"" + name + "\": " + e.what());
    }
    // The wrapper exactly as the templates write a call (the model's own habit); the
    // arguments' whitespace is the schema compiler's.
    calls.push_back(b.seq({b.literal("{\"name\": \"" + name + "\", \"" + args_key + "\": "),
                           b.call(args), b.literal("}")}));
  }
  const st::ExprId call = b.call(b.add_rule("tool_call", b.alt(calls)));
  auto more = [&](std::string_view separator, st::ExprId item) {
    return r.parallel ? b.star(b.seq({b.literal(separator), item})) : b.empty();
  };
  st::ExprId body = call;
  switch (f) {
    case ToolCallFormat::hermes:
    case ToolCallFormat::none: {
      // As Qwen's template shows its model: the JSON on a line of its own inside the tags.
      const st::ExprId item =
          b.seq({b.literal("<tool_call>\n"), call, b.literal("\n</tool_call>")});
      body = b.seq({item, more("\n", item)});
      break;
    }
    case ToolCallFormat::llama3_json:
      body = b.seq({call, more("; ", call)});
      break;
    case ToolCallFormat::mistral:
      // [TOOL_CALLS] is a control token, which no constraint can emit: the bare list.
      body = b.seq({b.literal("["), call, more(", ", call), b.literal("]")});
      break;
  }
  b.set_start(b.add_rule("tool_calls", body));
  return b.build();
}

void apply_tool_request(const ToolRequest& tools, const ApiContext& ctx, ApiRequest& r) {
  if (tools.choice == ToolChoice::none || tools.names.empty()) return;
  ToolCallFormat f =
      ctx.tool_format ? *ctx.tool_format : detect_tool_call_format(ctx.chat.source());
  if (f == ToolCallFormat::none && tools.constrained()) f = ToolCallFormat::hermes;
  r.tool_calls = {f, tools.callable()};
  if (!tools.constrained()) return;
  if (r.constraint) {
    bad("tool_choice",
        "'tool_choice' \"required\" or a named function constrains the reply "
        "to a tool call, so it cannot be combined with '" +
            r.constraint->param + "'");
  }
  if (ctx.constraints == nullptr) {
    bad("tool_choice", "'tool_choice' needs constrained decoding, which is not available here");
  }
  const auto& vocab = ctx.constraints->vocab();
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(vocab.get()));
  key += '|';
  key += tool_call_format_name(f);
  key += tools.parallel ? "|p|" : "|1|";
  key += tools.choice == ToolChoice::named ? tools.named : std::string("*");
  key += '|';
  key += tools.tools.dump();
  if (auto hit = cache().get(key)) {
    r.params.constraint = std::move(hit);
    return;
  }
  try {
    auto compiled = st::CompiledGrammar::compile(tool_call_grammar(tools, f), vocab);
    cache().put(std::move(key), compiled);
    r.params.constraint = std::move(compiled);
  } catch (const st::GrammarError& e) {
    bad("tools", "the tools cannot constrain the reply: " + excerpt(e.what(), 400));
  }
}

}  // namespace lift
