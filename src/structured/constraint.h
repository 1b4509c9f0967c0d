// What a request constrains its output to, independent of the API field it came from
// (response_format, structured_outputs / guided_*, grammar, json_schema, tools), and the
// compile step from it to a CompiledGrammar, cached because clients repeat their schemas.
#pragma once

#include <chrono>
#include <condition_variable>
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

// Thrown by ConstraintCompiler::compile when its compile slots stay taken (a 503).
class CompilerBusy : public Error {
 public:
  using Error::Error;
};

struct CompilerOptions {
  // The most recent results kept: at most `capacity` of them and `max_bytes` together
  // (CompiledGrammar::bytes(): distinct schemas are request input, so what they leave behind
  // is bounded in memory, not only in number).
  size_t capacity = 64;
  size_t max_bytes = size_t{512} << 20;
  CompileLimits limits;
  // Compiles running at once, and how long one more waits for a slot before CompilerBusy:
  // compiles run on the HTTP threads, and slow constraints must not take all of them.
  size_t max_compiling = 2;
  std::chrono::milliseconds busy_wait{2000};
};

// Compiles specs against one vocabulary and keeps recent results (CompilerOptions).
// Thread-safe (the HTTP threads compile before a request reaches the engine).
class ConstraintCompiler {
 public:
  explicit ConstraintCompiler(std::shared_ptr<const TokenVocab> vocab, CompilerOptions o = {});
  // Throws GrammarError (the spec) or CompilerBusy (the compile slots).
  std::shared_ptr<const CompiledGrammar> compile(const ConstraintSpec& spec);
  const std::shared_ptr<const TokenVocab>& vocab() const { return vocab_; }
  size_t cached() const;        // entries kept
  size_t cached_bytes() const;  // their bytes()
  size_t compiling() const;     // compiles running now

 private:
  std::shared_ptr<const TokenVocab> vocab_;
  CompilerOptions o_;
  size_t bytes_ = 0;
  size_t compiling_ = 0;
  std::condition_variable slot_freed_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace lift::structured
