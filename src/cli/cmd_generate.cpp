// lift generate: one prompt in, streamed text out, with the timings a user cares about. It runs
// one request through the serving Engine, so stop strings, min_tokens, the sampler and
// speculative decoding behave exactly as in `lift serve`. Only --no-kv-cache, a demonstration
// of what the cache saves, runs the plain single-sequence loop (engine/generate.h) instead.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/spec_report.h"
#include "cli/timing.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "kernels/isa.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace lift::cli {

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  int n_tokens = 128;
  int min_tokens = 0;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int64_t seed = -1;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;
  bool ids = false;
  bool no_kv_cache = false;
  bool stats = false;
  bool json = false;
  bool ignore_eos = false;
  bool reference = false;
  EngineOptions engine;
};

SamplingParams sampling_of(const GenerateOptions& o) {
  SamplingParams s;
  s.temperature = o.temperature;
  s.top_k = o.top_k;
  s.top_p = o.top_p;
  s.min_p = o.min_p;
  s.repetition_penalty = o.repeat_penalty;
  s.presence_penalty = o.presence_penalty;
  s.frequency_penalty = o.frequency_penalty;
  s.seed = o.seed >= 0
               ? static_cast<uint64_t>(o.seed)
               : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return s;
}

// BOS as the vocabulary says (add_bos_token), as the server encodes a prompt. An empty prompt
// means BOS alone, like llama2.c's run with no prompt.
std::vector<int32_t> encode_prompt(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> p = tok.encode(text, tok.vocab().add_bos(), /*parse_special=*/false);
  if (p.empty()) {
    if (tok.vocab().bos_id() < 0) throw Error("the prompt is empty and the vocabulary has no BOS");
    p.push_back(tok.vocab().bos_id());
  }
  return p;
}

bool bos_only(const Tokenizer& tok, const std::vector<int32_t>& prompt) {
  return prompt.size() == 1 && prompt[0] == tok.vocab().bos_id();
}

void print_backend(const char* backend, int threads, bool exact_activations, double load_s) {
  const int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  std::fprintf(stderr, "lift: backend %s, isa %s, %d threads, activations %s; loaded in %.2f s\n",
               backend, std::string(kernels::isa_name(kernels::active_isa())).c_str(), n,
               exact_activations ? "f32" : "quantized to 8 bits for quantized weights", load_s);
}

struct Timings {
  size_t prompt_tokens = 0;
  size_t output_tokens = 0;
  double load_s = 0;
  double ttft_s = 0;    // request in to its first token out
  double decode_s = 0;  // first token to the last
  FinishReason finish = FinishReason::none;

  double prefill_rate() const {
    return ttft_s > 0 ? static_cast<double>(prompt_tokens) / ttft_s : 0;
  }
  // Tokens after the first over the time after the first: the decode steps alone.
  double decode_rate() const {
    return output_tokens > 1 && decode_s > 0 ? static_cast<double>(output_tokens - 1) / decode_s
                                             : 0;
  }
};

void print_timings(const Timings& t) {
  std::fprintf(stderr,
               "\nlift: prompt %zu tokens, prefill %.1f tokens/s, decode %.1f tokens/s "
               "(%zu tokens), time to first token %.1f ms\n",
               t.prompt_tokens, t.prefill_rate(), t.decode_rate(),
               t.output_tokens > 0 ? t.output_tokens - 1 : 0, t.ttft_s * 1e3);
}

void print_ids(const std::vector<int32_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
}

int run_engine(const GenerateOptions& o) {
  if (const int rc = run_tp_follower(o.engine, o.model); rc >= 0) return rc;
  const auto t_load = Clock::now();
  const std::unique_ptr<LlamaModel> draft = o.engine.load_draft_model();
  EngineConfig cfg = o.engine.to_config(draft.get());
  auto model = LlamaModel::load(o.model, Comm::shard_of(cfg.tp));
  const Tokenizer tok = Tokenizer::from_gguf(model->file());
  cfg.reference_backend = o.reference;
  Engine engine(*model, tok, cfg);
  Timings t;
  t.load_s = secs(Clock::now() - t_load);
  print_memory_plan(engine);
  print_backend(o.reference ? "reference" : "cpu", o.engine.threads, o.engine.exact_activations,
                t.load_s);

  const std::vector<int32_t> prompt = encode_prompt(tok, o.prompt);
  t.prompt_tokens = prompt.size();
  if (!o.ids && !bos_only(tok, prompt)) {
    std::fputs(tok.decode(prompt).c_str(), stdout);
    std::fflush(stdout);
  }
  RequestParams p;
  // Like generate()'s -c: the output stops where prompt + output reach max-model-len.
  const size_t room = engine.max_model_len() > prompt.size()
                          ? engine.max_model_len() - prompt.size()
                          : size_t{1};  // add_request names the problem
  p.max_tokens = static_cast<int>(std::min(static_cast<size_t>(o.n_tokens), room));
  p.min_tokens = std::min(o.min_tokens, p.max_tokens);
  p.ignore_eos = o.ignore_eos;
  p.stop = o.stop;
  p.stop_token_ids = o.stop_token_ids;
  p.sampling = sampling_of(o);

  std::vector<int32_t> ids;
  if (o.n_tokens > 0) {
    const auto t0 = Clock::now();
    Clock::time_point first{}, last{};
    const Submitted sub = engine.add_request(prompt, std::move(p));
    // Stepping on this thread: each step's output is printed before the next step runs.
    for (bool more = true; more;) {
      more = engine.step();
      while (auto out = sub.stream->try_pop()) {
        if (out->finish == FinishReason::error) throw Error(out->error);
        const auto now = Clock::now();
        if (!out->token_ids.empty() && first == Clock::time_point{}) first = now;
        if (out->finish != FinishReason::none) {
          t.finish = out->finish;
          t.output_tokens = static_cast<size_t>(out->completion_tokens);
        }
        last = now;
        ids.insert(ids.end(), out->token_ids.begin(), out->token_ids.end());
        if (!o.ids && !out->text.empty()) {
          std::fputs(out->text.c_str(), stdout);
          std::fflush(stdout);
        }
      }
    }
    // A first token that was a stop token has no ids: it still ended the first step.
    if (first == Clock::time_point{}) first = last;
    t.ttft_s = secs(first - t0);
    t.decode_s = secs(last - first);
  }
  if (o.ids) print_ids(ids);
  std::printf("\n");
  std::fflush(stdout);

  print_timings(t);
  const EngineMetrics m = engine.metrics();
  if (o.stats) {
    std::fprintf(stderr, "lift: load %.2f s, finish %s, %zu output tokens, %llu engine steps\n",
                 t.load_s, finish_reason_name(t.finish), t.output_tokens,
                 static_cast<unsigned long long>(m.steps));
    std::fprintf(stderr, "lift: %s\n", spec_summary(m.spec).c_str());
  }
  if (o.json) {
    const nlohmann::json j = {{"prompt_tokens", t.prompt_tokens},
                              {"output_tokens", t.output_tokens},
                              {"finish", finish_reason_name(t.finish)},
                              {"load_s", t.load_s},
                              {"ttft_s", t.ttft_s},
                              {"prefill_tokens_per_s", t.prefill_rate()},
                              {"decode_tokens_per_s", t.decode_rate()},
                              {"steps", m.steps},
                              {"spec", spec_json(m.spec)}};
    std::fprintf(stderr, "%s\n", j.dump().c_str());
  }
  return 0;
}

// The naive loop: every step recomputes the whole sequence, and --stats says how many token
// positions that costs against a run with a KV cache.
int run_without_cache(const GenerateOptions& o) {
  if (!o.stop.empty() || o.min_tokens > 0 || o.engine.spec_method() != SpecMethod::off) {
    throw Error(
        "--no-kv-cache runs the plain recompute loop, which has no --stop, --min-tokens or "
        "speculative decoding; drop --no-kv-cache to use them");
  }
  const auto t_load = Clock::now();
  auto model = LlamaModel::load(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(model->file());
  ThreadPool pool(o.engine.threads);
  BackendOptions bo;
  bo.quantize_activations = !o.engine.exact_activations;
  auto backend = o.reference ? make_reference_backend(bo) : make_cpu_backend(pool, bo);
  Timings t;
  t.load_s = secs(Clock::now() - t_load);
  print_backend(backend->name(), pool.size(), o.engine.exact_activations, t.load_s);

  GenerationRequest req;
  req.prompt = encode_prompt(tok, o.prompt);
  req.max_tokens = o.n_tokens;
  req.max_model_len = o.engine.max_model_len;
  req.sampling = sampling_of(o);
  req.stop_token_ids = o.stop_token_ids;
  req.eos_id = tok.vocab().eos_id();
  req.ignore_eos = o.ignore_eos;
  req.use_kv_cache = false;

  const bool at_start = bos_only(tok, req.prompt);
  StreamDecoder dec(tok, at_start);
  std::string text;
  if (!o.ids && !at_start) {
    std::fputs(tok.decode(req.prompt).c_str(), stdout);
    std::fflush(stdout);
  }
  auto on_token = [&](int32_t tk) {
    if (!o.ids) {
      text.clear();
      dec.push(tk, text);
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  const GenerationResult res = generate(*model, *backend, req, on_token);
  if (o.ids) {
    print_ids(res.tokens);
  } else {
    std::fputs(dec.flush().c_str(), stdout);
  }
  std::printf("\n");
  std::fflush(stdout);

  t.prompt_tokens = req.prompt.size();
  t.output_tokens = res.tokens.size();
  t.ttft_s = res.ttft_seconds;
  t.decode_s = res.decode_seconds;
  print_timings(t);
  if (o.stats) {
    std::fprintf(stderr,
                 "lift: token positions processed: %llu (no KV cache); a run without a KV cache "
                 "processes %llu, a run with one %llu\n",
                 static_cast<unsigned long long>(res.positions_processed),
                 static_cast<unsigned long long>(res.positions_without_cache),
                 static_cast<unsigned long long>(t.prompt_tokens +
                                                 (t.output_tokens ? t.output_tokens - 1 : 0)));
  }
  return 0;
}

}  // namespace

Runner add_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  o->engine.max_seqs = 1;  // one request: the automatic KV budget is one full-length sequence
  CLI::App* c = app.add_subcommand("generate", "Generate text from a prompt");
  c->add_option("-m,--model", o->model, "GGUF model file")->required();
  c->add_option("-p,--prompt", o->prompt, "Prompt text (\"\" = BOS alone)");
  c->add_option("-n,--n-tokens", o->n_tokens,
                "Tokens to generate (fewer where prompt + output reach --max-model-len)")
      ->check(CLI::Range(0, 1 << 24));
  c->add_option("--min-tokens", o->min_tokens,
                "Tokens generated before EOS, stop ids or stop strings may end the output")
      ->check(CLI::Range(0, 1 << 24));
  c->add_option("--temp", o->temperature, "Temperature (0 = greedy)")
      ->check(CLI::Range(0.0, 100.0));
  c->add_option("--top-k", o->top_k, "Top-k (0 = off)");
  c->add_option("--top-p", o->top_p, "Top-p (1 = off)");
  c->add_option("--min-p", o->min_p, "Min-p (0 = off)");
  c->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1 = off)");
  c->add_option("--presence-penalty", o->presence_penalty, "Presence penalty");
  c->add_option("--frequency-penalty", o->frequency_penalty, "Frequency penalty");
  c->add_option("-s,--seed", o->seed, "Random seed (-1 = from the clock)");
  c->add_option("--stop", o->stop,
                "Stop where the text contains this string, not printed (repeatable)");
  c->add_option("--stop-token-ids", o->stop_token_ids, "Stop when one of these ids is sampled")
      ->delimiter(',');
  c->add_flag("--ids", o->ids, "Print the generated token ids instead of text");
  c->add_flag("--no-kv-cache", o->no_kv_cache,
              "Recompute the whole sequence at every step: a demonstration of what the KV cache "
              "saves, run by the plain single-sequence loop (no engine, so no --stop, "
              "--min-tokens or speculation)");
  c->add_flag("--stats", o->stats,
              "Print load time, finish, engine steps and speculative decoding's counters (with "
              "--no-kv-cache: token positions processed with and without the cache)");
  c->add_flag("--json", o->json, "Print the timings and counters as one JSON line on stderr");
  c->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past the end-of-sequence token");
  c->add_flag("--reference", o->reference, "Use the scalar reference backend (slow)");
  add_engine_options(c, o->engine);
  return [o] { return o->no_kv_cache ? run_without_cache(*o) : run_engine(*o); };
}

}  // namespace lift::cli
