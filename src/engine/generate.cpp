#include "engine/generate.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "util/error.h"

namespace lift {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

GenerationResult generate(LlamaModel& model, Backend& backend, const GenerationRequest& req,
                          const std::function<bool(int32_t)>& on_token,
                          const std::function<void(std::span<const float>)>& on_logits) {
  const ModelConfig& cfg = model.config();
  if (req.prompt.empty()) throw Error("the prompt is empty: at least one token is needed");
  const size_t max_len = req.prompt.size() + static_cast<size_t>(std::max(req.max_tokens, 0));
  const auto context = static_cast<size_t>(cfg.context_length);
  if (req.max_model_len > context) {
    throw Error("--max-model-len " + std::to_string(req.max_model_len) +
                " is longer than the model's context of " + std::to_string(context) +
                " tokens; use at most " + std::to_string(context));
  }
  // Prompt and generated tokens together fit in the limit, as in the engine.
  const size_t limit = req.max_model_len > 0 ? req.max_model_len : context;
  if (req.prompt.size() >= limit) {
    throw Error("the prompt has " + std::to_string(req.prompt.size()) + " tokens, but " +
                (req.max_model_len > 0 ? "--max-model-len is " : "the model's context is ") +
                std::to_string(limit) + " (the prompt must leave room for a generated token)");
  }
  if (const std::string err = req.sampling.validate(cfg.n_vocab); !err.empty()) throw Error(err);
  const size_t len_cap = std::min(max_len, limit);
  const auto max_tokens = static_cast<int>(std::min<size_t>(
      static_cast<size_t>(std::max(req.max_tokens, 0)), limit - req.prompt.size()));

  // One sequence owning blocks 0..n-1 of a private cache.
  constexpr size_t kBlock = 16;
  const size_t n_blocks = (len_cap + kBlock - 1) / kBlock;
  KvCache kv(cfg, n_blocks, kBlock);
  std::vector<int32_t> table(n_blocks);
  std::iota(table.begin(), table.end(), 0);

  std::vector<int32_t> seq = req.prompt;
  seq.reserve(len_cap);
  std::vector<int32_t> positions(len_cap);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<const int32_t*> tables(len_cap, table.data());
  std::vector<float> logits(static_cast<size_t>(cfg.n_vocab));
  Sampler sampler(cfg.n_vocab);
  GenerationResult res;

  const auto t0 = Clock::now();
  size_t done = 0;  // tokens of seq whose K/V are in the cache
  for (int step = 0; step < max_tokens; ++step) {
    const size_t begin = req.use_kv_cache ? done : 0;
    const size_t n = seq.size() - begin;
    const int32_t last = static_cast<int32_t>(n - 1);
    // Positions before the prompt's end are prompt tokens, the rest generated ones.
    const size_t n_prompt = req.prompt.size() > begin ? req.prompt.size() - begin : 0;
    ForwardBatch b{{seq.data() + begin, n},
                   {positions.data() + begin, n},
                   {tables.data() + begin, n},
                   {&last, 1},
                   n_prompt};
    const auto ts = Clock::now();
    model.forward(backend, b, kv, logits.data());
    res.positions_processed += n;
    res.positions_without_cache += seq.size();
    done = seq.size();
    if (on_logits) on_logits(logits);

    const std::span<const int32_t> prompt(req.prompt);
    const std::span<const int32_t> output(seq.data() + req.prompt.size(),
                                          seq.size() - req.prompt.size());
    const int32_t tok =
        sampler.sample(logits, req.sampling, prompt, output, 0, static_cast<uint64_t>(step));
    if (step == 0) {
      res.prefill_seconds = seconds_since(ts);
      res.ttft_seconds = seconds_since(t0);
    } else {
      res.decode_seconds += seconds_since(ts);
    }
    res.tokens.push_back(tok);
    if (!req.ignore_eos && tok == req.eos_id) {
      res.finish = FinishReason::stop;
      break;
    }
    if (std::find(req.stop_token_ids.begin(), req.stop_token_ids.end(), tok) !=
        req.stop_token_ids.end()) {
      res.finish = FinishReason::stop;
      break;
    }
    if (on_token && !on_token(tok)) {
      res.finish = FinishReason::stop;
      break;
    }
    seq.push_back(tok);  // the last one is never fed back, so len_cap positions suffice
  }
  return res;
}

}  // namespace lift
