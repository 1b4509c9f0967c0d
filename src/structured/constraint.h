// What a request constrains its output to, independent of the API field it came from
// (response_format, structured_outputs / guided_*, grammar, json_schema, tools), and the
// compile step from it to a CompiledGrammar, cached because clients repeat their schemas.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/json_schema.h"
#include "structured/matcher.h"

namespace lift::structured {

enum class ConstraintKind { json_schema, json_object, regex, choice, grammar };

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::json_object;
  std::string text;                  // schema (JSON text), regex, or GBNF
  std::vector<std::string> choices;  // kind == choice
  JsonSchemaOptions json;
  std::string key() const;  // cache key: equal specs, equal keys
};

// The grammar of a spec. json_object: any JSON object. Throws GrammarError.
Grammar build_grammar(const ConstraintSpec& spec, const GrammarLimits& limits = {});

// Compiles specs against one vocabulary and keeps the most recent results, at most `capacity`
// of them and `max_bytes` together (CompiledGrammar::bytes(): distinct schemas are request
// input, so what they leave behind is bounded in memory, not only in number).
// Thread-safe (the HTTP threads compile before a request reaches the engine).
class ConstraintCompiler {
 public:
  ConstraintCompiler(std::shared_ptr<const TokenVocab> vocab, size_t capacity = 64,
                     size_t max_bytes = size_t{512} << 20, CompileLimits limits = {});
  std::shared_ptr<const CompiledGrammar> compile(const ConstraintSpec& spec);
  const std::shared_ptr<const TokenVocab>& vocab() const { return vocab_; }
  size_t cached() const;        // entries kept
  size_t cached_bytes() const;  // their bytes()

 private:
  std::shared_ptr<const TokenVocab> vocab_;
  size_t capacity_;
  size_t max_bytes_;
  CompileLimits limits_;
  size_t bytes_ = 0;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace lift::structured
