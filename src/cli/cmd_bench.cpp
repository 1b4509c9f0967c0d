// lift bench: offline throughput (sequential vs static vs continuous batching) and the
// head-of-line latency benchmark (a short request arriving behind a long prompt).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/joining_thread.h"
#include "cli/spec_report.h"
#include "cli/timing.h"
#include "engine/engine.h"
#include "structured/constraint.h"
#include "util/error.h"

namespace lift::cli {

namespace {

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int len, int vocab, int32_t bos) {
  std::vector<int32_t> p;
  p.reserve(static_cast<size_t>(len));
  if (bos >= 0) p.push_back(bos);
  std::uniform_int_distribution<int32_t> d(3, vocab - 1);
  while (p.size() < static_cast<size_t>(len)) p.push_back(d(rng));
  return p;
}

// ---- throughput -----------------------------------------------------------------------------

struct ThroughputOptions {
  std::string model;
  int num_prompts = 64;
  int input_len = 128;
  int output_len = 128;
  std::string schedulers = "all";
  uint64_t seed = 0;
  bool json = false;
  std::string json_schema;  // each scheduler also runs with this schema, for the ratio
  EngineOptions engine;
};

struct ThroughputRun {
  nlohmann::json result;
  SpecDecodeMetrics spec;
};

// constraint: every request's output follows it (null: plain decoding). A constrained
// request may complete its text before output_len tokens; tokens/s counts what it produced.
ThroughputRun run_throughput(LlamaModel& model, LlamaModel* draft, const Tokenizer& tok,
                             const ThroughputOptions& o, const std::string& policy,
                             std::shared_ptr<const structured::CompiledGrammar> constraint) {
  EngineOptions eo = o.engine;
  eo.scheduler = policy;
  EngineConfig cfg = eo.to_config(draft);
  if (policy == "static") cfg.scheduler.max_seqs = std::min<size_t>(cfg.scheduler.max_seqs, 64);
  Engine engine(model, tok, cfg);
  std::mt19937_64 rng(o.seed);
  std::vector<Submitted> subs;
  RequestParams p;
  p.max_tokens = o.output_len;
  p.ignore_eos = true;
  p.sampling.temperature = 0;
  p.constraint = std::move(constraint);
  const auto t0 = Clock::now();
  for (int i = 0; i < o.num_prompts; ++i) {
    subs.push_back(engine.add_request(
        random_prompt(rng, o.input_len, model.config().n_vocab, tok.vocab().bos_id()), p));
  }
  engine.run_until_idle();
  const double elapsed = secs(Clock::now() - t0);
  uint64_t out_tokens = 0;
  for (auto& s : subs) {
    int n = 0;
    while (auto out = s.stream->pop(std::chrono::milliseconds(0))) {
      n += static_cast<int>(out->token_ids.size());
      if (out->finish == FinishReason::error) throw Error("request failed: " + out->error);
    }
    if (p.constraint ? n > o.output_len : n != o.output_len) {
      throw Error("a request produced " + std::to_string(n) + " tokens instead of " +
                  std::to_string(o.output_len));
    }
    out_tokens += static_cast<uint64_t>(n);
  }
  const auto m = engine.metrics();
  const double in_tokens = static_cast<double>(o.num_prompts) * o.input_len;
  nlohmann::json r = {
      {"scheduler", policy},
      {"requests", o.num_prompts},
      {"input_len", o.input_len},
      {"output_len", o.output_len},
      {"elapsed_s", elapsed},
      {"requests_per_s", o.num_prompts / elapsed},
      {"output_tokens_per_s", static_cast<double>(out_tokens) / elapsed},
      {"total_tokens_per_s", (in_tokens + static_cast<double>(out_tokens)) / elapsed},
      {"steps", m.steps},
      {"preemptions", m.preemptions},
      {"spec", spec_json(m.spec)}};
  if (p.constraint) r["json_schema"] = o.json_schema;
  return {std::move(r), m.spec};
}

// The schema of --json-schema compiled against the model's vocabulary, timed (that is the
// time to first mask a server pays once per new schema).
std::shared_ptr<const structured::CompiledGrammar> compile_schema_file(const std::string& path,
                                                                       const Tokenizer& tok) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("bench throughput: cannot read --json-schema " + path);
  structured::ConstraintSpec spec;
  spec.kind = structured::ConstraintKind::json_schema;
  spec.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  const auto t0 = Clock::now();
  try {
    structured::CompilerOptions one;
    one.capacity = 1;
    structured::ConstraintCompiler compiler(structured::TokenVocab::from_tokenizer(tok), one);
    auto g = compiler.compile(spec);
    std::printf("json schema %s compiled in %.3f s\n", path.c_str(), secs(Clock::now() - t0));
    return g;
  } catch (const structured::GrammarError& e) {
    throw Error("bench throughput: --json-schema " + path + ": " + e.what());
  }
}

int throughput(const ThroughputOptions& o) {
  const std::unique_ptr<LlamaModel> draft = o.engine.load_draft_model();
  auto model = LlamaModel::load(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(model->file());
  std::vector<std::string> policies;
  if (o.schedulers == "all") {
    policies = {"sequential", "static", "continuous"};
  } else {
    policies = {o.schedulers};
  }
  size_t max_len = 0;
  {
    Engine probe(*model, tok, o.engine.to_config(draft.get()));
    print_memory_plan(probe);
    max_len = probe.max_model_len();
  }
  // Each request must produce exactly output_len tokens, so prompt and output must fit.
  if (static_cast<size_t>(o.input_len) + static_cast<size_t>(o.output_len) > max_len) {
    throw Error("bench throughput: --input-len " + std::to_string(o.input_len) +
                " plus --output-len " + std::to_string(o.output_len) +
                " tokens do not fit max-model-len " + std::to_string(max_len) +
                "; lower them to a sum of at most " + std::to_string(max_len) +
                " (or raise --max-model-len up to the model's context)");
  }
  const auto constraint = o.json_schema.empty() ? nullptr : compile_schema_file(o.json_schema, tok);
  std::printf("%-18s %9s %10s %14s %14s %8s\n", "scheduler", "elapsed_s", "requests/s",
              "output_tok/s", "total_tok/s", "steps");
  auto run = [&](const std::string& p, std::shared_ptr<const structured::CompiledGrammar> c) {
    const auto [r, spec] = run_throughput(*model, draft.get(), tok, o, p, std::move(c));
    const std::string label = r.contains("json_schema") ? p + "+schema" : p;
    std::printf("%-18s %9.2f %10.2f %14.1f %14.1f %8llu\n", label.c_str(),
                r["elapsed_s"].get<double>(), r["requests_per_s"].get<double>(),
                r["output_tokens_per_s"].get<double>(), r["total_tokens_per_s"].get<double>(),
                static_cast<unsigned long long>(r["steps"].get<uint64_t>()));
    if (!spec.proposer.empty()) std::printf("  %s\n", spec_summary(spec).c_str());
    std::fflush(stdout);
    return r;
  };
  nlohmann::json all = nlohmann::json::array();
  nlohmann::json schema_runs = nlohmann::json::array();
  nlohmann::json schema_ratio = nlohmann::json::object();
  for (const auto& p : policies) {
    all.push_back(run(p, nullptr));
    if (!constraint) continue;
    // Plain and constrained back to back, so both see the same machine.
    const nlohmann::json c = run(p, constraint);
    const double ratio =
        c["output_tokens_per_s"].get<double>() / all.back()["output_tokens_per_s"].get<double>();
    std::printf("  %s: output tokens/s with the schema / without: %.3fx\n", p.c_str(), ratio);
    schema_ratio[p] = ratio;
    schema_runs.push_back(c);
  }
  nlohmann::json summary = {{"benchmark", "throughput"}, {"model", o.model}, {"runs", all}};
  if (constraint) {
    summary["schema_runs"] = schema_runs;
    summary["schema_over_plain"] = schema_ratio;
  }
  if (all.size() == 3) {
    const double seq = all[0]["output_tokens_per_s"].get<double>();
    summary["static_over_sequential"] = all[1]["output_tokens_per_s"].get<double>() / seq;
    summary["continuous_over_sequential"] = all[2]["output_tokens_per_s"].get<double>() / seq;
    std::printf("output tokens/s ratio vs sequential: static %.2fx, continuous %.2fx\n",
                summary["static_over_sequential"].get<double>(),
                summary["continuous_over_sequential"].get<double>());
  }
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

// ---- head of line ---------------------------------------------------------------------------

struct HolOptions {
  std::string model;
  int long_len = 2000;
  int short_len = 16;
  int decoders = 4;
  int delay_ms = 100;
  EngineOptions engine;
};

struct HolResult {
  double short_ttft = 0, median_step = 0, max_gap = 0;
};

// Records, on a thread of its own, when each output of a stream arrived. Destroying a Watch
// stops and joins its thread, also while an exception unwinds run_hol().
class Watch {
 public:
  explicit Watch(std::shared_ptr<OutputStream> stream)
      : stream_(std::move(stream)), reader_([this] { read(); }) {}
  ~Watch() { stop_ = true; }  // then reader_, the last member, joins

  // Outputs with tokens seen so far.
  size_t count() const { return count_.load(); }
  bool finished() const { return finished_.load(); }
  // Waits until the stream is done; then the arrival times and the stream's error, if any.
  void wait() { reader_.join(); }
  const std::vector<Clock::time_point>& times() const { return times_; }  // after wait()
  std::vector<Clock::time_point> times_so_far() const {
    std::lock_guard<std::mutex> lock(mu_);
    return times_;
  }
  std::string error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  void read() {
    while (!stream_->done() && !stop_) {
      if (auto o = stream_->pop(std::chrono::milliseconds(20))) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!o->token_ids.empty()) {
          times_.push_back(Clock::now());
          ++count_;
        }
        if (o->finish == FinishReason::error) error_ = o->error;
      }
    }
    finished_ = true;
  }

  std::shared_ptr<OutputStream> stream_;
  mutable std::mutex mu_;
  std::vector<Clock::time_point> times_;
  std::string error_;
  std::atomic<size_t> count_{0};
  std::atomic<bool> stop_{false}, finished_{false};
  JoiningThread reader_;  // last: starts once everything above exists, joins first
};

// Streams already decoding when the long prompt arrives: each needs kDecoderPrompt prompt
// tokens and kSettleTokens generated ones before the measurement starts.
constexpr int kDecoderPrompt = 16;
constexpr size_t kSettleTokens = 20;

// Throws a lift::Error that says which option to change when the benchmark cannot run on this
// model (prompts that do not fit max-model-len would otherwise fail half-way through).
void check_hol_fits(const HolOptions& o, int context) {
  const auto fits = [&](int len, const char* option) {
    if (len < context) return;
    throw Error("bench hol: " + std::string(option) + " " + std::to_string(len) +
                " does not fit max-model-len " + std::to_string(context) +
                " tokens (a prompt must leave room for one generated token); pass " + option + " " +
                std::to_string(context - 1) + " or less");
  };
  fits(o.long_len, "--long-len");
  fits(o.short_len, "--short-len");
  if (o.decoders > 0 && context <= kDecoderPrompt + static_cast<int>(kSettleTokens)) {
    throw Error("bench hol: the decoding streams need a context of more than " +
                std::to_string(kDecoderPrompt + static_cast<int>(kSettleTokens)) +
                " tokens; this model has " + std::to_string(context) +
                " (pass --decoders 0 to run without them)");
  }
}

HolResult run_hol(LlamaModel& model, LlamaModel* draft, const Tokenizer& tok, const HolOptions& o,
                  size_t prefill_chunk) {
  EngineOptions eo = o.engine;
  eo.max_prefill_chunk = prefill_chunk;
  eo.max_batched_tokens = std::max(eo.max_batched_tokens, prefill_chunk);
  Engine engine(model, tok, eo.to_config(draft));
  engine.start();
  std::mt19937_64 rng(1);
  const int vocab = model.config().n_vocab;
  const int32_t bos = tok.vocab().bos_id();
  RequestParams decode_p;
  decode_p.max_tokens = static_cast<int>(engine.max_model_len()) - kDecoderPrompt;
  decode_p.ignore_eos = true;
  decode_p.sampling.temperature = 0;
  std::vector<std::unique_ptr<Watch>> decoders;
  std::vector<uint64_t> ids;
  for (int i = 0; i < o.decoders; ++i) {
    const auto s = engine.add_request(random_prompt(rng, kDecoderPrompt, vocab, bos), decode_p);
    ids.push_back(s.id);
    decoders.push_back(std::make_unique<Watch>(s.stream));
  }
  // Let them settle into decoding.
  for (auto& w : decoders) {
    while (w->count() < kSettleTokens) {
      if (w->finished()) {
        const std::string err = w->error();
        throw Error("bench hol: a decoding stream ended after " + std::to_string(w->count()) +
                    " tokens" + (err.empty() ? std::string() : ": " + err));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  RequestParams one;
  one.max_tokens = 1;
  one.ignore_eos = true;
  one.sampling.temperature = 0;
  const auto t_long = Clock::now();
  Watch long_w(engine.add_request(random_prompt(rng, o.long_len, vocab, bos), one).stream);
  std::this_thread::sleep_for(std::chrono::milliseconds(o.delay_ms));
  const auto t_short = Clock::now();
  Watch short_w(engine.add_request(random_prompt(rng, o.short_len, vocab, bos), one).stream);
  short_w.wait();
  long_w.wait();
  for (const Watch* w : {&short_w, &long_w}) {
    if (!w->error().empty()) throw Error("bench hol: a request failed: " + w->error());
  }
  const auto t_end = long_w.times().empty() ? Clock::now() : long_w.times().back();
  for (uint64_t id : ids) engine.abort(id);
  for (auto& w : decoders) w->wait();
  engine.stop();

  HolResult r;
  r.short_ttft = short_w.times().empty() ? -1 : secs(short_w.times().front() - t_short);
  // Step time: the gaps between tokens of the streams already decoding while the long prompt
  // is being prefilled; each such gap is one engine step of that mixed batch.
  std::vector<double> during;
  for (auto& w : decoders) {
    const auto& times = w->times();
    for (size_t i = 1; i < times.size(); ++i) {
      if (times[i] > t_long && times[i - 1] < t_end) {
        during.push_back(secs(times[i] - times[i - 1]));
      }
    }
  }
  std::sort(during.begin(), during.end());
  r.median_step = during.empty() ? 0 : during[during.size() / 2];
  r.max_gap = during.empty() ? 0 : during.back();
  return r;
}

int hol(const HolOptions& o) {
  const std::unique_ptr<LlamaModel> draft = o.engine.load_draft_model();
  auto model = LlamaModel::load(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(model->file());
  {
    Engine probe(*model, tok, o.engine.to_config(draft.get()));
    print_memory_plan(probe);
    check_hol_fits(o, static_cast<int>(probe.max_model_len()));
  }
  const auto capped = run_hol(*model, draft.get(), tok, o, o.engine.max_prefill_chunk);
  const auto uncapped = run_hol(*model, draft.get(), tok, o, 2048);
  auto row = [](const char* name, const HolResult& r) {
    std::printf(
        "%-22s short TTFT %8.1f ms  median step %7.1f ms  TTFT/step %5.2f  "
        "longest decode gap %8.1f ms (%.2f steps)\n",
        name, r.short_ttft * 1e3, r.median_step * 1e3, r.short_ttft / r.median_step,
        r.max_gap * 1e3, r.max_gap / r.median_step);
  };
  char name[64];
  std::snprintf(name, sizeof name, "max-prefill-chunk %zu", o.engine.max_prefill_chunk);
  row(name, capped);
  row("max-prefill-chunk 2048", uncapped);
  std::printf("short TTFT capped / uncapped: %.2f\n", capped.short_ttft / uncapped.short_ttft);
  nlohmann::json j = {{"benchmark", "head_of_line"},
                      {"capped",
                       {{"chunk", o.engine.max_prefill_chunk},
                        {"short_ttft_s", capped.short_ttft},
                        {"median_step_s", capped.median_step},
                        {"max_decode_gap_s", capped.max_gap}}},
                      {"uncapped",
                       {{"chunk", 2048},
                        {"short_ttft_s", uncapped.short_ttft},
                        {"median_step_s", uncapped.median_step},
                        {"max_decode_gap_s", uncapped.max_gap}}}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto t = std::make_shared<ThroughputOptions>();
  CLI::App* tc = bench->add_subcommand("throughput", "Offline throughput of the engine");
  tc->add_option("-m,--model", t->model, "GGUF model")->required();
  tc->add_option("--num-prompts", t->num_prompts, "Requests")->check(CLI::Range(1, 100000));
  tc->add_option("--input-len", t->input_len, "Prompt tokens")->check(CLI::Range(1, 1 << 20));
  tc->add_option("--output-len", t->output_len, "Generated tokens")->check(CLI::Range(1, 1 << 20));
  tc->add_option("--scheduler", t->schedulers, "sequential|static|continuous|all");
  tc->add_option("--seed", t->seed, "Prompt seed");
  tc->add_option("--json-schema", t->json_schema,
                 "Also run each scheduler with output constrained to this JSON Schema file, and "
                 "report the tokens/s ratio");
  add_engine_options(tc, t->engine);

  auto h = std::make_shared<HolOptions>();
  CLI::App* hc = bench->add_subcommand("hol", "Head-of-line: a short request behind a long one");
  hc->add_option("-m,--model", h->model, "GGUF model")->required();
  hc->add_option("--long-len", h->long_len, "Long prompt tokens")->check(CLI::Range(1, 1 << 24));
  hc->add_option("--short-len", h->short_len, "Short prompt tokens")->check(CLI::Range(1, 1 << 24));
  hc->add_option("--decoders", h->decoders, "Streams already decoding")->check(CLI::Range(0, 4096));
  hc->add_option("--delay-ms", h->delay_ms, "Delay between the long and the short request")
      ->check(CLI::Range(0, 600000));
  add_engine_options(hc, h->engine);

  std::function<int()> model_run, serve_run, structured_run;
  add_bench_model(bench, model_run);
  add_bench_serve(bench, serve_run);
  add_bench_structured(bench, structured_run);

  return [=] {
    if (int rc = model_run(); rc >= 0) return rc;
    if (int rc = serve_run(); rc >= 0) return rc;
    if (int rc = structured_run(); rc >= 0) return rc;
    if (tc->parsed()) return throughput(*t);
    if (hc->parsed()) return hol(*h);
    return 1;
  };
}

}  // namespace lift::cli
