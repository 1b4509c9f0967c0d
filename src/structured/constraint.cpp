#include "structured/constraint.h"

#include <nlohmann/json.hpp>

#include "structured/gbnf.h"
#include "structured/regex.h"

namespace lift::structured {

namespace {

const char* kind_name(ConstraintKind k) {
  switch (k) {
    case ConstraintKind::json_schema:
      return "json_schema";
    case ConstraintKind::json_object:
      return "json_object";
    case ConstraintKind::regex:
      return "regex";
    case ConstraintKind::choice:
      return "choice";
    case ConstraintKind::grammar:
      return "grammar";
  }
  return "?";
}

// Length-prefixed, so no two different specs can spell the same key whatever bytes their
// strings hold.
void put(std::string& key, std::string_view s) {
  key += std::to_string(s.size());
  key += ':';
  key += s;
}

Grammar single_rule(GrammarBuilder& b, const char* name, ExprId body, const GrammarLimits& limits) {
  b.set_start(b.add_rule(name, body));
  return b.build(limits);
}

}  // namespace

std::string ConstraintSpec::key() const {
  std::string k = kind_name(kind);
  k += '|';
  if (kind == ConstraintKind::json_schema || kind == ConstraintKind::json_object) {
    k += std::to_string(json.max_whitespace);
    k += json.strict ? "s|" : "-|";
  }
  put(k, text);
  for (const std::string& c : choices) put(k, c);
  return k;
}

Grammar build_grammar(const ConstraintSpec& spec, const GrammarLimits& limits) {
  switch (spec.kind) {
    case ConstraintKind::json_schema: {
      // Ordered: properties are generated in the order the schema writes them.
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(spec.text);
      } catch (const nlohmann::ordered_json::exception& e) {
        throw GrammarError(std::string("the JSON schema is not valid JSON: ") + e.what());
      }
      return json_schema_grammar(schema, spec.json, limits);
    }
    case ConstraintKind::json_object: {
      // Any object: the schema {"type": "object"} leaves its members unconstrained, and strict
      // mode (which would forbid every member) does not apply to a schema the client never
      // wrote.
      JsonSchemaOptions opt = spec.json;
      opt.strict = false;
      return json_schema_grammar(nlohmann::json{{"type", "object"}}, opt, limits);
    }
    case ConstraintKind::regex: {
      GrammarBuilder b;
      RegexOptions opt;
      opt.anchored = true;  // guided_regex: the whole output matches
      const ExprId e = compile_regex(spec.text, b, opt);
      return single_rule(b, "regex", e, limits);
    }
    case ConstraintKind::choice: {
      if (spec.choices.empty()) throw GrammarError("a choice constraint needs at least one string");
      GrammarBuilder b;
      std::vector<ExprId> options;
      options.reserve(spec.choices.size());
      for (const std::string& c : spec.choices) options.push_back(b.literal(c));
      return single_rule(b, "choice", b.alt(options), limits);
    }
    case ConstraintKind::grammar:
      return gbnf_grammar(spec.text, limits);
  }
  throw GrammarError("unknown constraint kind");
}

ConstraintCompiler::ConstraintCompiler(std::shared_ptr<const TokenVocab> vocab, CompilerOptions o)
    : vocab_(std::move(vocab)), o_(o) {
  if (!vocab_) throw Error("ConstraintCompiler: no vocabulary");
  if (o_.max_compiling == 0) throw Error("ConstraintCompiler: no compile slots");
}

size_t ConstraintCompiler::cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t ConstraintCompiler::compiling() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compiling_;
}

size_t ConstraintCompiler::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

std::shared_ptr<const CompiledGrammar> ConstraintCompiler::compile(const ConstraintSpec& spec) {
  std::string key = spec.key();
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto hit = [&]() -> std::shared_ptr<const CompiledGrammar> {
      const auto it = index_.find(key);
      if (it == index_.end()) return nullptr;
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    };
    if (auto g = hit()) return g;
    if (!slot_freed_.wait_for(lock, o_.busy_wait, [&] { return compiling_ < o_.max_compiling; })) {
      throw CompilerBusy("the server is compiling other output constraints; retry shortly");
    }
    if (auto g = hit()) return g;  // compiled by another thread meanwhile
    ++compiling_;
  }
  struct Slot {
    ConstraintCompiler& c;
    ~Slot() {
      {
        std::lock_guard<std::mutex> lock(c.mu_);
        --c.compiling_;
      }
      c.slot_freed_.notify_one();
    }
  } slot{*this};
  // Compiled without the lock: one slow schema must not hold up requests for cached ones. Two
  // threads compiling the same new spec both do the work; the second result replaces nothing.
  auto compiled = CompiledGrammar::compile(build_grammar(spec), vocab_, o_.limits);
  const size_t size = compiled->bytes();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;
  if (o_.capacity == 0 || size > o_.max_bytes) return compiled;  // served, not kept
  lru_.emplace_front(key, compiled);
  index_.emplace(std::move(key), lru_.begin());
  bytes_ += size;
  while (lru_.size() > o_.capacity || bytes_ > o_.max_bytes) {
    bytes_ -= lru_.back().second->bytes();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

}  // namespace lift::structured
