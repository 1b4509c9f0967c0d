// lift generate: one prompt in, streamed text out, with the timings a user cares about.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/timing.h"
#include "engine/generate.h"
#include "kernels/isa.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace lift::cli {

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  int n_tokens = 128;
  size_t max_model_len = 0;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int64_t seed = -1;
  int threads = 0;
  std::vector<int32_t> stop_token_ids;
  bool ids = false;
  bool no_kv_cache = false;
  bool stats = false;
  bool ignore_eos = false;
  bool exact_activations = false;
  bool reference = false;
};

int run_generate(const GenerateOptions& o) {
  const auto t_load = Clock::now();
  auto model = LlamaModel::load(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(model->file());
  const double load_s = secs(Clock::now() - t_load);

  ThreadPool pool(o.threads);
  BackendOptions bo;
  bo.quantize_activations = !o.exact_activations;
  auto backend = o.reference ? make_reference_backend(bo) : make_cpu_backend(pool, bo);

  GenerationRequest req;
  // An empty prompt means BOS alone, like llama2.c's run with no prompt.
  req.prompt = tok.encode(o.prompt, /*add_bos=*/true, /*parse_special=*/false);
  if (req.prompt.empty()) req.prompt.push_back(tok.vocab().bos_id());
  req.max_tokens = o.n_tokens;
  req.max_model_len = o.max_model_len;
  req.sampling.temperature = o.temperature;
  req.sampling.top_k = o.top_k;
  req.sampling.top_p = o.top_p;
  req.sampling.min_p = o.min_p;
  req.sampling.repetition_penalty = o.repeat_penalty;
  req.sampling.presence_penalty = o.presence_penalty;
  req.sampling.frequency_penalty = o.frequency_penalty;
  req.sampling.seed =
      o.seed >= 0
          ? static_cast<uint64_t>(o.seed)
          : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  req.stop_token_ids = o.stop_token_ids;
  req.eos_id = tok.vocab().eos_id();
  req.ignore_eos = o.ignore_eos;
  req.use_kv_cache = !o.no_kv_cache;

  std::fprintf(stderr,
               "lift: %s (%s), %d layers, dim %d, %d heads (%d kv), vocab %d, %.1f MB weights, "
               "loaded in %.2f s\n",
               model->config().name.c_str(), o.model.c_str(), model->config().n_layers,
               model->config().dim, model->config().n_heads, model->config().n_kv_heads,
               model->config().n_vocab, static_cast<double>(model->weight_bytes()) / 1e6, load_s);
  std::fprintf(stderr, "lift: backend %s, isa %s, %d threads, activations %s\n", backend->name(),
               std::string(kernels::isa_name(kernels::active_isa())).c_str(), pool.size(),
               o.exact_activations ? "f32" : "quantized to 8 bits for quantized weights");

  const bool bos_only = req.prompt.size() == 1 && req.prompt[0] == tok.vocab().bos_id();
  StreamDecoder dec(tok, /*at_start=*/bos_only);
  std::string text;
  if (!o.ids && !bos_only) {
    std::fputs(tok.decode(req.prompt).c_str(), stdout);
    std::fflush(stdout);
  }
  auto on_token = [&](int32_t t) {
    if (!o.ids) {
      text.clear();
      dec.push(t, text);
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  const GenerationResult res = generate(*model, *backend, req, on_token);
  if (o.ids) {
    for (size_t i = 0; i < res.tokens.size(); ++i) {
      std::printf("%s%d", i ? " " : "", res.tokens[i]);
    }
  } else {
    std::fputs(dec.flush().c_str(), stdout);
  }
  std::printf("\n");
  std::fflush(stdout);

  const size_t n_prompt = req.prompt.size();
  const size_t n_decode = res.tokens.empty() ? 0 : res.tokens.size() - 1;
  std::fprintf(stderr,
               "\nlift: prompt %zu tokens, prefill %.1f tokens/s, decode %.1f tokens/s "
               "(%zu tokens), time to first token %.1f ms\n",
               n_prompt, static_cast<double>(n_prompt) / res.prefill_seconds,
               n_decode ? static_cast<double>(n_decode) / res.decode_seconds : 0.0, n_decode,
               res.ttft_seconds * 1e3);
  if (o.stats) {
    std::fprintf(stderr,
                 "lift: token positions processed: %llu (%s); a run without a KV cache processes "
                 "%llu, a run with one %llu\n",
                 static_cast<unsigned long long>(res.positions_processed),
                 o.no_kv_cache ? "no KV cache" : "with KV cache",
                 static_cast<unsigned long long>(res.positions_without_cache),
                 static_cast<unsigned long long>(n_prompt + n_decode));
  }
  return 0;
}

}  // namespace

Runner add_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* c = app.add_subcommand("generate", "Generate text from a prompt");
  c->add_option("-m,--model", o->model, "GGUF model file")->required();
  c->add_option("-p,--prompt", o->prompt, "Prompt text (\"\" = BOS alone)");
  c->add_option("-n,--n-tokens", o->n_tokens, "Tokens to generate")->check(CLI::Range(0, 1 << 24));
  c->add_option("-c,--max-model-len", o->max_model_len,
                "Stop when prompt + output reach this many tokens (default: the model's context)")
      ->check(CLI::PositiveNumber);
  c->add_option("--temp", o->temperature, "Temperature (0 = greedy)")
      ->check(CLI::Range(0.0, 100.0));
  c->add_option("--top-k", o->top_k, "Top-k (0 = off)");
  c->add_option("--top-p", o->top_p, "Top-p (1 = off)");
  c->add_option("--min-p", o->min_p, "Min-p (0 = off)");
  c->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1 = off)");
  c->add_option("--presence-penalty", o->presence_penalty, "Presence penalty");
  c->add_option("--frequency-penalty", o->frequency_penalty, "Frequency penalty");
  c->add_option("-s,--seed", o->seed, "Random seed (-1 = from the clock)");
  c->add_option("-t,--threads", o->threads, "Threads (0 = all cores)");
  c->add_option("--stop-token-ids", o->stop_token_ids, "Stop when one of these ids is sampled")
      ->delimiter(',');
  c->add_flag("--ids", o->ids, "Print the generated token ids instead of text");
  c->add_flag("--no-kv-cache", o->no_kv_cache, "Recompute the whole sequence at every step");
  c->add_flag("--stats", o->stats, "Print token positions processed with and without the cache");
  c->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past the end-of-sequence token");
  c->add_flag("--exact-activations", o->exact_activations,
              "Multiply quantized weights with f32 activations (slower, no activation rounding)");
  c->add_flag("--reference", o->reference, "Use the scalar reference backend (slow)");
  return [o] { return run_generate(*o); };
}

}  // namespace lift::cli
