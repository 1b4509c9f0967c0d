// lift bench structured: the MaskBench protocol (../shared/structured/README.md) over a folder
// of its files, one file per forked child, single-threaded; prints the verdict counts, the mask
// timings (TBM, TTFM) as percentiles, compile errors by keyword, the failing files, and one
// JSON line with all of it. The protocol itself lives in structured/maskbench.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/timing.h"
#include "structured/maskbench.h"
#include "structured/token_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace lift::cli {

namespace {

struct StructuredBenchOptions {
  std::string dir;
  std::string vocab;
  size_t limit = 0;
  std::string filter;
  bool json_only = false;
  size_t failures = 30;
  uint32_t whitespace = structured::JsonSchemaOptions{}.max_whitespace;
  double time_limit_s = 60;
  double mem_limit_gib = 8;
};

void print_percentiles(const char* what, const structured::maskbench::Percentiles& p) {
  std::printf(
      "%s\n  p25 %.1f  p50 %.1f  p75 %.1f  p90 %.1f  p95 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
      what, p.p25, p.p50, p.p75, p.p90, p.p95, p.p99, p.p999, p.max);
}

void print_report(const structured::maskbench::Summary& s, const StructuredBenchOptions& o) {
  using structured::maskbench::Verdict;
  const auto n = [&](Verdict v) { return s.counts.at(v); };
  std::printf(
      "files %zu: passing %zu (%.2f%%), compile error %zu, validation error %zu, invalidation "
      "error %zu, engine error %zu, crash %zu, timeout %zu, load error %zu\n",
      s.files, n(Verdict::pass),
      s.files ? 100.0 * static_cast<double>(n(Verdict::pass)) / static_cast<double>(s.files) : 0.0,
      n(Verdict::compile_error), n(Verdict::validation_error), n(Verdict::invalidation_error),
      n(Verdict::engine_error), n(Verdict::crash), n(Verdict::timeout), n(Verdict::load_error));
  std::printf("instances %zu (%zu judged right), tokens %zu\n", s.instances, s.instances_right,
              s.tokens);
  char what[160];
  std::snprintf(what, sizeof what,
                "TBM, us (%zu masks: every token of every instance of the %zu files that "
                "compiled and finished, passing or not)",
                s.tbm.count, s.compiled);
  print_percentiles(what, s.tbm);
  std::snprintf(what, sizeof what, "TTFM, us (compile + first mask, %zu files)", s.ttfm.count);
  print_percentiles(what, s.ttfm);
  std::snprintf(what, sizeof what, "accept(), us per token (%zu tokens)", s.accept.count);
  print_percentiles(what, s.accept);
  std::printf("compile errors by keyword (%zu files):\n", n(Verdict::compile_error));
  std::vector<std::pair<std::string, size_t>> keywords(s.compile_error_keywords.begin(),
                                                       s.compile_error_keywords.end());
  std::stable_sort(keywords.begin(), keywords.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [k, count] : keywords) std::printf("  %-28s %zu\n", k.c_str(), count);
  std::printf("failing files (%zu of %zu listed):\n", std::min(o.failures, s.failures.size()),
              s.failures.size());
  for (size_t i = 0; i < s.failures.size() && i < o.failures; ++i) {
    const auto& r = *s.failures[i];
    std::printf("  %-18s %s: %s\n", structured::maskbench::verdict_name(r.verdict), r.name.c_str(),
                r.reason.c_str());
  }
}

int run_structured_bench(const StructuredBenchOptions& o) {
  namespace mb = structured::maskbench;
  const std::vector<std::string> files = mb::list_files(o.dir, o.filter, o.limit);
  if (files.empty()) throw Error("bench structured: no *.json files in " + o.dir);
  const Tokenizer tok = Tokenizer::load(o.vocab);
  const auto vocab = structured::TokenVocab::from_tokenizer(tok);
  mb::RunOptions ro;
  ro.schema.max_whitespace = o.whitespace;
  const auto mem_limit = static_cast<uint64_t>(o.mem_limit_gib * 1024 * 1024 * 1024);
  if (!o.json_only) {
    std::printf(
        "MaskBench: %zu files from %s, vocabulary %s (%d tokens), max whitespace %u, time limit "
        "%g s, one forked child per file\n",
        files.size(), o.dir.c_str(), o.vocab.c_str(), vocab->size(), o.whitespace, o.time_limit_s);
    std::fflush(stdout);
  }
  std::vector<mb::FileResult> results;
  results.reserve(files.size());
  const auto t0 = Clock::now();
  size_t passing = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    results.push_back(mb::run_file_isolated(files[i], tok, vocab, ro, o.time_limit_s, mem_limit));
    passing += results.back().verdict == mb::Verdict::pass;
    if ((i + 1) % 100 == 0 || i + 1 == files.size()) {
      std::fprintf(stderr, "  %zu/%zu files, %zu passing, %.1f s\n", i + 1, files.size(), passing,
                   secs(Clock::now() - t0));
    }
  }
  const double elapsed = secs(Clock::now() - t0);
  const mb::Summary s = mb::summarize(results);
  if (!o.json_only) {
    print_report(s, o);
    std::printf("elapsed %.1f s\n", elapsed);
  }
  nlohmann::json j = mb::summary_json(s, o.failures);
  j["dir"] = o.dir;
  j["vocab"] = o.vocab;
  j["max_whitespace"] = o.whitespace;
  j["time_limit_s"] = o.time_limit_s;
  j["elapsed_s"] = elapsed;
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

void add_bench_structured(CLI::App* bench, std::function<int()>& run) {
  auto o = std::make_shared<StructuredBenchOptions>();
  CLI::App* c = bench->add_subcommand(
      "structured", "MaskBench: JSON Schema constraints judged and timed token by token");
  c->add_option("dir", o->dir, "Folder of MaskBench *.json files")->required();
  c->add_option("--vocab", o->vocab, "GGUF with the tokenizer (Llama 3 for MaskBench)")->required();
  c->add_option("--limit", o->limit, "Only the first N files (by name)");
  c->add_option("--filter", o->filter, "Only files whose name contains this");
  c->add_flag("--json-only", o->json_only, "Print only the JSON line");
  c->add_option("--failures", o->failures, "How many failing files to list");
  c->add_option("--whitespace", o->whitespace, "Longest whitespace run the schemas allow")
      ->check(CLI::Range(0, 1 << 20));
  c->add_option("--time-limit", o->time_limit_s, "Seconds per file before it is killed")
      ->check(CLI::Range(0.001, 1e6));
  c->add_option("--mem-limit", o->mem_limit_gib, "GiB of address space per file (0: none)")
      ->check(CLI::Range(0.0, 1e6));
  run = [c, o] { return c->parsed() ? run_structured_bench(*o) : -1; };
}

}  // namespace lift::cli
