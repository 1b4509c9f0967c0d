// The MaskBench protocol (../shared/structured/README.md) as a library, so that tests run the
// same code as `lift bench structured`: load one file, serialize its instances as Python's
// json.dumps does, compile the schema, walk each instance's tokens through the masks, judge,
// time. A file can run in a forked child, so that a crash or a hang in the engine is counted
// against that file instead of ending the benchmark.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "structured/json_schema.h"

namespace lift {
class Tokenizer;
}

namespace lift::structured {
class TokenVocab;
}

namespace lift::structured::maskbench {

// ---- files and the instance text -------------------------------------------------------------

struct Instance {
  std::string description;
  bool valid = false;
  // `data` as Python's json.dumps(data, indent=None, ensure_ascii=False) writes it: the text
  // the published results were measured on (its tokens decide every verdict).
  std::string text;
};

struct BenchFile {
  std::string name;               // the file name, e.g. "Github_easy---o1234.json"
  nlohmann::ordered_json schema;  // keeps the property order the schema writes
  std::vector<Instance> tests;
};

// Parses one MaskBench file. Throws lift::Error naming the file and what is wrong (not JSON,
// no "schema", a test without "valid" or "data", a duplicate key inside "data": Python would
// keep the first key's place and the last value, which a streaming writer cannot).
BenchFile parse_file(std::string_view text, const std::string& name);
BenchFile load_file(const std::string& path);

// json.dumps(json.loads(json_text), ensure_ascii=False): ", " and ": " separators, non-ASCII
// raw, \" \\ \b \f \n \r \t and \u00xx for the other controls, integers as written (also
// beyond 64 bits), floats as Python's repr. Throws lift::Error for text that is not JSON.
std::string python_dumps(std::string_view json_text);
// Python's repr of a float: shortest round-trip digits, exponent form when the exponent is
// below -4 or at least 16 ("1e-05", "1.5e+16"), ".0" on integral values; NaN, Infinity.
std::string python_float_repr(double v);

// The *.json files of `dir` sorted by name, those containing `filter` (all when empty), at
// most `limit` of them (0: no limit). Throws lift::Error when dir is not a readable folder.
std::vector<std::string> list_files(const std::string& dir, const std::string& filter = "",
                                    size_t limit = 0);

// ---- running one file ------------------------------------------------------------------------

// Worst first: a file with several failures gets the most severe one.
enum class Verdict {
  pass,
  load_error,          // the file itself is unusable (see parse_file)
  compile_error,       // the engine refused the schema (GrammarError): honest
  validation_error,    // a valid instance rejected (or the walk failed with a GrammarError)
  engine_error,        // an exception other than GrammarError, or mask and accept() disagree
  invalidation_error,  // an invalid instance accepted: the engine let wrong output through
  crash,               // the child ended on a signal or without a result
  timeout,             // the child passed the time limit and was killed
};
const char* verdict_name(Verdict v);
Verdict verdict_from_name(std::string_view name);  // throws lift::Error for an unknown name

struct FileResult {
  std::string name;
  Verdict verdict = Verdict::pass;
  std::string reason;  // why it failed, one line; empty on pass
  bool compiled = false;
  int64_t ttfm_ns = 0;             // compile + first mask, when compiled
  std::vector<int64_t> tbm_ns;     // every fill_mask of every instance
  std::vector<int64_t> accept_ns;  // every accept() of every instance
  size_t instances = 0, instances_right = 0;
  size_t tokens = 0;
};

nlohmann::json to_json(const FileResult& r);
FileResult file_result_from_json(const nlohmann::json& j);

struct RunOptions {
  JsonSchemaOptions schema;
};

// Judges every instance of `file` in this process (exceptions from the engine become
// verdicts; nothing escapes but std::bad_alloc's kin from the bench itself).
// `phase`, when given, hears "compiling" and "walking test #N" as the run gets there.
FileResult run_file(const BenchFile& file, const Tokenizer& tok,
                    const std::shared_ptr<const TokenVocab>& vocab, const RunOptions& opt,
                    const std::function<void(const std::string&)>& phase = {});

// ---- isolation ------------------------------------------------------------------------------

struct ChildOutcome {
  enum Kind { finished, crashed, timed_out } kind = finished;
  std::string output;     // what `work` returned (finished only)
  std::string detail;     // crashed: the signal or exit status
  std::string last_note;  // the last line the child passed to `note`: where it was
};

// Runs `work` in a forked child and returns its string through a pipe. The child is killed
// (SIGKILL) after `time_limit_s`; `mem_limit_bytes` (0: none) caps its address space, so a
// runaway allocation throws std::bad_alloc there instead of exhausting the machine. `work`
// may call `note` with one-line progress notes, so a killed child still says where it was.
using Note = std::function<void(const std::string&)>;
ChildOutcome run_in_child(const std::function<std::string(const Note& note)>& work,
                          double time_limit_s, uint64_t mem_limit_bytes = 0);

// load_file + run_file in a child; crash, timeout and load errors become verdicts.
FileResult run_file_isolated(const std::string& path, const Tokenizer& tok,
                             const std::shared_ptr<const TokenVocab>& vocab, const RunOptions& opt,
                             double time_limit_s, uint64_t mem_limit_bytes);

// ---- the report -----------------------------------------------------------------------------

// The keyword a compile error names, to group failures by JSON Schema feature: the last
// keyword of the first JSON pointer in it ("/properties/a/pattern": pattern), "format X" for
// a format, "allOf/$ref: X" when merging could not combine X, else the first quoted word, else
// "(stage)" from a "stage: ..." message, else "(unnamed)".
std::string error_keyword(const std::string& message);

struct Percentiles {
  size_t count = 0;
  double p25 = 0, p50 = 0, p75 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0, max = 0;  // µs
};
Percentiles percentiles_us(std::vector<int64_t> ns);

struct Summary {
  std::map<Verdict, size_t> counts;  // every verdict, also the zero ones
  size_t files = 0, instances = 0, instances_right = 0, tokens = 0;
  size_t compiled = 0;  // files whose schema compiled and that finished (the timing sample)
  Percentiles tbm, ttfm, accept;
  std::map<std::string, size_t> compile_error_keywords;
  std::vector<const FileResult*> failures;  // in file order
};
Summary summarize(const std::vector<FileResult>& results);

// The one JSON line: counts, rates, percentiles, compile errors by keyword, and the first
// `max_failures` failing files with their reasons.
nlohmann::json summary_json(const Summary& s, size_t max_failures);

}  // namespace lift::structured::maskbench
