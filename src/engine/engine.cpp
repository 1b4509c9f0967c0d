#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kernels/act_quant.h"
#include "parallel/tp_backend.h"
#include "parallel/tp_step.h"
#include "util/error.h"

namespace lift {

namespace {

// LIFT_SPEC_TRACE set: one stderr line per speculating engine step with the controller's plan,
// its predicted cost and where the step's time went (docs/speculative.md).
bool spec_trace_enabled() {
  static const bool on = std::getenv("LIFT_SPEC_TRACE") != nullptr;
  return on;
}

MemoryPlan make_plan(const LlamaModel& model, const EngineConfig& e) {
  MemoryRequest r;
  r.max_model_len = e.max_model_len;
  r.kv_cache_bytes = e.kv_cache_bytes;
  r.kv_blocks = e.kv_blocks;
  r.kv_type = e.kv_type;
  r.block_size = e.block_size;
  r.max_seqs = e.scheduler.max_seqs;
  if (e.spec.method == SpecMethod::draft && e.spec.draft_model != nullptr) {
    r.draft_model = &e.spec.draft_model->config();
  }
  const bool from_machine = e.kv_blocks == 0 && e.kv_cache_bytes == 0;
  // Both models' weights come out of the memory the automatic budget splits.
  const size_t weights =
      model.weight_bytes() + (r.draft_model ? e.spec.draft_model->weight_bytes() : 0);
  return plan_memory(model.config(), weights, r, from_machine ? mem_available_bytes() : 0,
                     e.scheduler.max_prefill_chunk);
}

// Where every layer slides, the scheduler gives back blocks the window has left behind.
SchedulerConfig with_window(SchedulerConfig s, const ModelConfig& m) {
  s.kv_window = static_cast<size_t>(std::max(m.kv_window(), 0));
  return s;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// How much a sample's reason says about its request: the most severe one is the request's.
int finish_rank(FinishReason r) {
  switch (r) {
    case FinishReason::stop:
      return 1;
    case FinishReason::length:
      return 2;
    case FinishReason::abort:
      return 3;
    case FinishReason::error:
      return 4;
    default:
      return 0;
  }
}

std::unique_ptr<Backend> make_backend(const EngineConfig& cfg, ThreadPool& pool) {
  std::unique_ptr<Backend> be = cfg.reference_backend ? make_reference_backend(cfg.backend)
                                                      : make_cpu_backend(pool, cfg.backend);
  if (cfg.tp == nullptr || cfg.tp->size() == 1) return be;
  return std::make_unique<TpBackend>(std::move(be), *cfg.tp);
}

}  // namespace

Engine::Engine(LlamaModel& model, const Tokenizer& tokenizer, EngineConfig cfg)
    : model_(model),
      tok_(tokenizer),
      cfg_(cfg),
      plan_(make_plan(model, cfg)),
      pool_(cfg.threads),
      backend_(make_backend(cfg, pool_)),
      kv_(model.config(), plan_.n_blocks, cfg.block_size, plan_.kv_type, Comm::shard_of(cfg.tp)),
      blocks_(kv_.n_blocks(), cfg.block_size, cfg.prefix_caching),
      scheduler_(with_window(cfg.scheduler, model.config()), blocks_),
      runner_(model, *backend_, kv_),
      outputs_(tokenizer, static_cast<int>(plan_.max_model_len)),
      sampler_(model.config().n_vocab),
      logits_processor_(model.config().n_vocab, tokenizer.vocab().eos_id()),
      verifier_(sampler_),
      controller_(cfg.spec, cfg.scheduler.max_batched_tokens) {
  if (const std::string err = cfg.spec.validate(); !err.empty()) throw Error(err);
  // Rope tables that depend on the context (LongRoPE's factor sets) are fixed from here on.
  model_.set_context_length(plan_.max_model_len);
  if (cfg.spec.draft_model != nullptr)
    cfg.spec.draft_model->set_context_length(plan_.max_model_len);
  if (cfg.tp != nullptr && cfg.tp->size() > 1) {
    // Speculation needs nothing of the followers: verification rows are rows of the sharded
    // forward pass, and a draft model runs whole on this rank (Backend::local).
    tp_ = std::make_unique<TpLeader>(*cfg.tp);
    tp_->send_geometry(kv_, plan_.max_model_len);
    runner_.set_tp(tp_.get());
  }
  proposer_ = make_proposer(cfg.spec, model, backend_->local(), kv_);
  if (proposer_) {
    metrics_.spec.proposer = std::string(proposer_->name());
    metrics_.spec.accepted_per_pos.assign(static_cast<size_t>(kMaxSpecTokens), 0);
  }
  if (tokenizer.vocab().size() != model.config().n_vocab) {
    throw Error("the tokenizer has " + std::to_string(tokenizer.vocab().size()) +
                " tokens but the model's vocabulary has " + std::to_string(model.config().n_vocab));
  }
  metrics_.kv_total_blocks = kv_.n_blocks();
  // Where prompt and generated tokens take different kernels, cached K/V of one kind must not
  // stand in for the other's (the bits would then depend on what was cached).
  const auto& tensors = model.file().tensors();
  blocks_.keep_kinds_apart(std::any_of(tensors.begin(), tensors.end(), [&](const auto& t) {
    const bool product = t.name != "token_embd.weight" || model.tied_output();
    return product && t.n_dims == 2 &&
           kernels::kinds_differ(t.type, cfg.backend.quantize_activations);
  }));
}

Engine::~Engine() {
  stop();
  if (tp_) tp_->stop();
}

Submitted Engine::add_request(std::string_view text, RequestParams params) {
  return add_request(tok_.encode(text, tok_.vocab().add_bos(), /*parse_special=*/false),
                     std::move(params));
}

Submitted Engine::add_request(std::vector<int32_t> prompt, RequestParams params) {
  const ModelConfig& mc = model_.config();
  if (prompt.empty()) throw Error("the prompt is empty: at least one token is needed");
  for (int32_t t : prompt) {
    if (t < 0 || t >= mc.n_vocab) {
      throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                  std::to_string(mc.n_vocab - 1) + ")");
    }
  }
  const size_t max_len = plan_.max_model_len;
  if (prompt.size() >= max_len) {
    throw Error("the prompt has " + std::to_string(prompt.size()) +
                " tokens, but max-model-len is " + std::to_string(max_len) +
                " tokens (the prompt must leave room for at least one generated token)");
  }
  if (const std::string err = params.validate(mc.n_vocab); !err.empty()) throw Error(err);
  if (static_cast<size_t>(params.n) > cfg_.scheduler.max_seqs) {
    throw Error("n is " + std::to_string(params.n) + " but at most " +
                std::to_string(cfg_.scheduler.max_seqs) +
                " samples run at once (--max-seqs); lower n or raise --max-seqs");
  }
  const size_t total = prompt.size() + static_cast<size_t>(params.max_tokens);
  if (total > max_len) {
    throw Error("the prompt (" + std::to_string(prompt.size()) + " tokens) and max_tokens (" +
                std::to_string(params.max_tokens) + ") make " + std::to_string(total) +
                " tokens, more than max-model-len " + std::to_string(max_len) +
                "; lower max_tokens to at most " + std::to_string(max_len - prompt.size()) +
                " or raise --max-model-len");
  }
  params.min_tokens = std::min(params.min_tokens, params.max_tokens);
  // A constrained sample's mask depends on every token before it, so a draft could only be
  // checked row by row against masks computed on the fly: constrained requests run without
  // speculation, which keeps them exact and simple.
  if (params.constraint) params.spec_tokens = 0;
  // One sample never needs more than a full-length sequence, which the plan checked fits;
  // forked samples each hold their own tail.
  const size_t bs = cfg_.block_size;
  const size_t window = scheduler_.config().kv_window;
  const size_t chunk = cfg_.scheduler.max_prefill_chunk;
  const auto n = static_cast<size_t>(params.n);
  const size_t need =
      window > 0 ? n * sequence_blocks(total, bs, window, chunk)
      : n == 1   ? sequence_blocks(total, bs)
                 : sequence_blocks(prompt.size(), bs) +
                     n * (sequence_blocks(static_cast<size_t>(params.max_tokens), bs) + 1);
  if (need > kv_.n_blocks()) {
    throw Error("the request needs up to " + std::to_string(need) + " KV blocks (" +
                std::to_string(prompt.size()) + " prompt tokens, max_tokens " +
                std::to_string(params.max_tokens) + ", n " + std::to_string(params.n) +
                ") but the whole cache has " + std::to_string(kv_.n_blocks()) +
                "; lower max_tokens or n, or raise --kv-cache-memory");
  }
  auto req = std::make_unique<RequestState>();
  req->id = next_request_id_.fetch_add(1);
  req->arrival = req->id;
  req->arrival_time = Clock::now();
  req->stream = std::make_shared<OutputStream>(params.n);
  req->params = std::move(params);
  req->n_prompt = static_cast<int>(prompt.size());
  Submitted s{req->id, req->stream};
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    // The loop's last drain of the inbox happens after stop_ is set under this lock: a
    // request that finds stop_ set would never be seen, so it ends here, aborted.
    if (!stop_.load()) {
      in_flight_.fetch_add(1);
      inbox_.push_back({std::move(req), std::move(prompt)});
      inbox_cv_.notify_one();
      return s;
    }
  }
  for (int i = 0; i < req->params.n; ++i) {
    RequestOutput out;
    out.request_id = req->id;
    out.index = i;
    out.finish = FinishReason::abort;
    out.prompt_tokens = req->n_prompt;
    req->stream->push(std::move(out));
  }
  std::lock_guard<std::mutex> lock(metrics_mu_);
  ++metrics_.requests_aborted;
  return s;
}

void Engine::abort(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    aborts_.push_back(id);
  }
  inbox_cv_.notify_one();
}

void Engine::admit(std::unique_ptr<RequestState> req, std::vector<int32_t> prompt) {
  auto seq = std::make_unique<Sequence>();
  seq->id = next_seq_id_++;
  seq->req = req.get();
  seq->index = 0;
  const bool bos_only = prompt.size() == 1 && prompt[0] == tok_.vocab().bos_id();
  seq->n_prompt = prompt.size();
  seq->tokens = std::move(prompt);
  seq->decoder = std::make_unique<StreamDecoder>(tok_, bos_only);
  if (req->params.constraint) seq->matcher.emplace(req->params.constraint);
  req->open_samples = req->params.n;
  scheduler_.add_waiting(seq.get());
  {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    metrics_.prompt_tokens += seq->n_prompt;
  }
  seqs_[req->id].push_back(std::move(seq));
  const uint64_t id = req->id;
  requests_.emplace(id, std::move(req));
}

void Engine::drain_inbox() {
  std::vector<Pending> in;
  std::vector<uint64_t> aborts;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    in.swap(inbox_);
    aborts.swap(aborts_);
  }
  for (Pending& p : in) admit(std::move(p.req), std::move(p.prompt));
  for (uint64_t id : aborts) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) continue;
    end_request(id, FinishReason::abort, {});
    seqs_.erase(it);
    requests_.erase(id);
    in_flight_.fetch_sub(1);
  }
}

void Engine::end_request(uint64_t id, FinishReason reason, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    ++(reason == FinishReason::abort ? metrics_.requests_aborted : metrics_.requests_failed);
  }
  for (auto& seq : seqs_.at(id)) {
    if (seq->status == SeqStatus::finished) continue;
    RequestOutput out;
    out.request_id = id;
    out.index = seq->index;
    out.finish = reason;
    out.error = error;
    outputs_.flush(*seq, out);
    finish(seq.get(), out);
  }
  // Samples not forked yet will never exist: close them too.
  RequestState* req = requests_.at(id).get();
  while (req->open_samples > 0) {
    RequestOutput out;
    out.request_id = id;
    out.index = req->params.n - req->open_samples;
    out.finish = reason;
    out.error = error;
    out.prompt_tokens = req->n_prompt;
    --req->open_samples;
    req->stream->push(std::move(out));
  }
}

void Engine::finish(Sequence* seq, RequestOutput& out) {
  RequestState* req = seq->req;
  out.prompt_tokens = req->n_prompt;
  out.completion_tokens = static_cast<int>(seq->n_output());
  out.cached_tokens = req->cached_tokens;
  scheduler_.remove(seq);
  --req->open_samples;
  if (finish_rank(out.finish) > finish_rank(req->finish)) req->finish = out.finish;
  // A request finishes with its last sample; aborted and failed ones are counted by
  // end_request and are no success.
  const bool success = req->finish == FinishReason::stop || req->finish == FinishReason::length;
  if (req->open_samples == 0 && success) {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    metrics_.e2e.observe(seconds(Clock::now() - req->arrival_time));
    ++metrics_.requests_finished;
    ++(req->finish == FinishReason::stop ? metrics_.requests_stop : metrics_.requests_length);
  }
  req->stream->push(std::move(out));
}

void Engine::fork_samples(Sequence* parent) {
  parent->forked = true;
  auto& group = seqs_[parent->req->id];
  for (int i = 1; i < parent->req->params.n; ++i) {
    auto child = std::make_unique<Sequence>();
    child->id = next_seq_id_++;
    child->req = parent->req;
    child->index = i;
    child->tokens = parent->tokens;
    child->n_prompt = parent->n_prompt;
    child->n_computed = parent->n_computed;
    child->proposer_computed = parent->proposer_computed;  // the shared blocks hold its K/V too
    child->forked = true;
    child->scheduled_once = true;
    child->decoder = std::make_unique<StreamDecoder>(tok_, parent->n_prompt == 1);
    child->matcher = parent->matcher;  // an independent copy: each sample advances its own
    blocks_.fork(parent->table, child->table);
    scheduler_.add_running(child.get());
    group.push_back(std::move(child));
  }
}

void Engine::sample_and_emit(Sequence* seq, std::span<float> logits) {
  RequestState* req = seq->req;
  const RequestParams& p = req->params;
  size_t first = 0, last = 1;  // range of samples in seqs_[req] drawing from these logits
  auto& group = seqs_[req->id];
  if (p.n > 1 && !seq->forked) {
    fork_samples(seq);
    first = group.size() - static_cast<size_t>(p.n);
    last = group.size();
  }
  for (size_t g = first; g < last; ++g) {
    Sequence* s = p.n > 1 && first + 1 != last ? group[g].get() : seq;
    std::span<float> l = logits;
    if (last - first > 1) {
      logits_copy_.assign(logits.begin(), logits.end());
      l = logits_copy_;
    }
    structured::Matcher* matcher = s->matcher ? &*s->matcher : nullptr;
    int32_t token = -1;
    bool complete = false;  // the constraint admits no more bytes
    SampleResult result;
    try {
      logits_processor_.apply(l, p, s->n_output(), matcher);
      const std::span<const int32_t> prompt(s->tokens.data(), s->n_prompt);
      const std::span<const int32_t> output(s->tokens.data() + s->n_prompt, s->n_output());
      token = sampler_.sample(l, p.sampling, prompt, output, static_cast<uint64_t>(s->index),
                              static_cast<uint64_t>(s->n_output()), p.logprobs ? &result : nullptr);
      complete = logits_processor_.advance(p, token, matcher);
    } catch (const structured::GrammarError& e) {
      fail_sample(s, e.what());
      continue;
    }
    // Alternatives the constraint ruled out have probability 0: not alternatives at all.
    if (matcher)
      std::erase_if(result.top, [](const TokenLogprob& t) { return std::isinf(t.logprob); });
    RequestOutput out;
    out.request_id = req->id;
    out.index = s->index;
    if (p.logprobs) out.logprobs.push_back({token, result.logprob, result.top});
    outputs_.process(*s, token, out);
    if (complete && out.finish == FinishReason::none) outputs_.flush(*s, out);
    if (complete) out.finish = FinishReason::stop;  // even where max_tokens ends it too
    count_tokens(s, 1);
    if (out.finish != FinishReason::none) {
      finish(s, out);
    } else {
      req->stream->push(std::move(out));
    }
  }
}

void Engine::fail_sample(Sequence* s, const std::string& why) {
  RequestState* req = s->req;
  if (req->finish != FinishReason::error) {  // a request fails once, whichever sample failed
    std::lock_guard<std::mutex> lock(metrics_mu_);
    ++metrics_.requests_failed;
  }
  RequestOutput out;
  out.request_id = req->id;
  out.index = s->index;
  out.finish = FinishReason::error;
  out.error = why;
  outputs_.flush(*s, out);
  finish(s, out);
}

void Engine::count_tokens(Sequence* s, size_t n) {
  RequestState* req = s->req;
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    metrics_.generation_tokens += n;
    if (!req->first_token) {  // once per request: the first token of any sample
      req->first_token = true;
      metrics_.ttft.observe(seconds(now - req->arrival_time));
    }
    // Tokens verified together arrive together: each is counted at the step's time per token.
    if (s->n_output() > n) {
      const double per = seconds(now - s->last_token_time) / static_cast<double>(n);
      for (size_t i = 0; i < n; ++i) metrics_.inter_token.observe(per);
    }
  }
  s->last_token_time = now;
}

size_t Engine::base_tokens() const {
  size_t n = 0;
  for (const Sequence* s : scheduler_.running()) {
    n += s->in_prefill() ? std::min(s->remaining(), cfg_.scheduler.max_prefill_chunk) : 1;
  }
  return std::max<size_t>(1, std::min(n, cfg_.scheduler.max_batched_tokens));
}

void Engine::propose_drafts() {
  draft_reqs_.clear();
  draft_batch_.clear();
  for (size_t i = 0; i < step_.batch.size(); ++i) {
    if (step_.batch[i].n_spec > 0) {
      draft_reqs_.push_back({step_.batch[i].seq, step_.batch[i].n_spec});
      draft_batch_.push_back(i);
    }
  }
  if (draft_reqs_.empty()) return;
  if (drafts_.size() < draft_reqs_.size()) drafts_.resize(draft_reqs_.size());
  for (size_t i = 0; i < draft_reqs_.size(); ++i) drafts_[i].clear();
  proposer_->propose(draft_reqs_, std::span<Draft>(drafts_.data(), draft_reqs_.size()));
  const auto vocab = static_cast<size_t>(model_.config().n_vocab);
  for (size_t i = 0; i < draft_reqs_.size(); ++i) {
    Sequence* seq = draft_reqs_[i].seq;
    Draft& d = drafts_[i];
    const size_t n = std::min(d.tokens.size(), draft_reqs_[i].max_tokens);
    for (size_t j = 0; j < n; ++j) {
      if (d.tokens[j] < 0 || static_cast<size_t>(d.tokens[j]) >= vocab) {
        throw Error("internal: proposer " + std::string(proposer_->name()) +
                    " proposed a token outside the vocabulary");
      }
    }
    if (!d.probs.empty() && d.probs.size() < n * vocab) {
      throw Error("internal: proposer " + std::string(proposer_->name()) +
                  " gave fewer distributions than tokens");
    }
    seq->tokens.insert(seq->tokens.end(), d.tokens.begin(),
                       d.tokens.begin() + static_cast<std::ptrdiff_t>(n));
    seq->n_draft = n;
    step_.batch[draft_batch_[i]].n_tokens += n;
  }
}

void Engine::verify_and_emit(const ModelRunner::Sampled& sampled, const Draft& draft) {
  Sequence* s = sampled.seq;
  RequestState* req = s->req;
  const RequestParams& p = req->params;
  const size_t n_draft = s->n_draft;
  const auto vocab = static_cast<size_t>(model_.config().n_vocab);
  // The drafts leave the sequence; the ones that stand come back one by one, as plain
  // decoding would have appended them, so each row's penalties see exactly its history.
  popped_.assign(s->tokens.end() - static_cast<std::ptrdiff_t>(n_draft), s->tokens.end());
  s->tokens.resize(s->tokens.size() - n_draft);
  s->n_draft = 0;
  RequestOutput out;
  out.request_id = req->id;
  out.index = s->index;
  size_t accepted = 0, emitted = 0;
  bool rejected = false;
  for (size_t i = 0; i <= n_draft; ++i) {
    std::span<float> l = runner_.logits(sampled.row(i));
    // No constraint here: constrained requests never draft (add_request).
    logits_processor_.apply(l, p, s->n_output(), nullptr);
    const int32_t guess = i < n_draft ? popped_[i] : -1;
    std::span<const float> q;
    if (guess >= 0 && !draft.probs.empty()) q = {draft.probs.data() + i * vocab, vocab};
    const std::span<const int32_t> prompt(s->tokens.data(), s->n_prompt);
    const std::span<const int32_t> output(s->tokens.data() + s->n_prompt, s->n_output());
    bool ok = false;
    const int32_t token =
        verifier_.verify(l, p.sampling, prompt, output, static_cast<uint64_t>(s->index),
                         static_cast<uint64_t>(s->n_output()), guess, q, &ok,
                         p.logprobs ? &sample_result_ : nullptr);
    if (p.logprobs) out.logprobs.push_back({token, sample_result_.logprob, sample_result_.top});
    outputs_.process(*s, token, out);
    ++emitted;
    if (ok) ++accepted;
    if (out.finish != FinishReason::none) break;
    if (guess < 0) break;
    if (!ok) {
      rejected = true;
      break;
    }
  }
  count_tokens(s, emitted);
  // Positions up to the last accepted draft hold K/V of the tokens that stand.
  s->n_computed += accepted;
  s->proposer_computed = std::min(s->proposer_computed, s->n_computed);
  controller_.observe_draft(*s, n_draft, accepted, rejected);
  {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    SpecDecodeMetrics& m = metrics_.spec;
    ++m.drafts;
    m.draft_tokens += n_draft;
    m.accepted_tokens += accepted;
    for (size_t i = 0; i < accepted && i < m.accepted_per_pos.size(); ++i) ++m.accepted_per_pos[i];
    m.accepted_length.observe(static_cast<double>(accepted));
  }
  if (out.finish == FinishReason::none) blocks_.truncate(s->table, s->n_computed);
  blocks_.commit(s->table, s->tokens, s->n_computed, s->n_prompt);
  if (out.finish != FinishReason::none) {
    finish(s, out);
  } else {
    req->stream->push(std::move(out));
  }
}

bool Engine::step() {
  drain_inbox();
  if (!scheduler_.has_work()) {
    refresh_gauges();  // aborts may have just emptied the engine
    return false;
  }
  if (proposer_)
    controller_.plan(scheduler_.running(), base_tokens(), plan_.max_model_len, *proposer_);
  scheduler_.schedule(step_);
  if (cfg_.check_invariants) {
    scheduler_.check(step_);
    std::vector<const BlockTable*> tables;
    for (const auto& [id, group] : seqs_) {
      for (const auto& s : group) {
        if (s->status != SeqStatus::finished) tables.push_back(&s->table);
      }
    }
    blocks_.check_invariants(tables);
  }
  if (step_.batch.empty()) {
    throw Error("internal: the scheduler found work but scheduled nothing");
  }
  const auto now = Clock::now();
  for (const ScheduledSeq& s : step_.batch) {
    Sequence* seq = s.seq;
    if (!seq->scheduled_once) {
      seq->scheduled_once = true;
      seq->req->cached_tokens = static_cast<int>(seq->n_computed);
      std::lock_guard<std::mutex> lock(metrics_mu_);
      metrics_.queue_time.observe(seconds(now - seq->req->arrival_time));
    }
  }
  runner_.apply_copies(step_);
  const auto t_propose = Clock::now();
  if (proposer_) {
    for (const auto& [src, dst] : step_.copies) proposer_->copy_block(src, dst);
    propose_drafts();
  }
  // What the controller's cost model reads: rows, and the positions they attend to in all
  // (a row at position p attends p + 1 of them), which grow with context where attention
  // weighs.
  size_t n_tokens = 0;
  double positions = 0;
  for (const ScheduledSeq& s : step_.batch) {
    n_tokens += s.n_tokens;
    const auto n = static_cast<double>(s.n_tokens);
    positions += n * static_cast<double>(s.seq->n_computed) + n * (n + 1) / 2;
  }
  const auto t0 = Clock::now();
  runner_.run(step_);
  const auto t_forward = Clock::now();
  for (const ScheduledSeq& s : step_.batch) {
    Sequence* seq = s.seq;
    const size_t before = seq->n_computed;
    // A speculating sequence's drafts count once the verifier accepts them.
    seq->n_computed += s.n_tokens - seq->n_draft;
    if (before < seq->recompute_from) {
      recomputed_tokens_ += std::min(seq->n_computed, seq->recompute_from) - before;
    }
    if (seq->n_computed >= seq->recompute_from) seq->recompute_from = 0;
    blocks_.commit(seq->table, seq->tokens, seq->n_computed, seq->n_prompt);
  }
  // Sampled sequences and drafts both come in batch order: one cursor finds each draft.
  size_t next_draft = 0;
  size_t n_drafted = 0;
  for (const ModelRunner::Sampled& s : runner_.sampled()) {
    if (s.seq->n_draft > 0) {
      while (next_draft < draft_reqs_.size() && draft_reqs_[next_draft].seq != s.seq) {
        ++next_draft;
      }
      if (next_draft == draft_reqs_.size()) {
        throw Error("internal: verifying a sequence that has no draft");
      }
      n_drafted += s.seq->n_draft;
      verify_and_emit(s, drafts_[next_draft++]);
    } else {
      sample_and_emit(s.seq, runner_.logits(s.first));
    }
  }
  // The controller weighs what a step of n tokens costs from forward pass to emitted tokens:
  // verifying rows and emitting their tokens grow with the drafts too.
  if (proposer_) {
    const auto t_end = Clock::now();
    controller_.observe_step(n_tokens, seconds(t_end - t0), positions);
    if (spec_trace_enabled()) {
      const SpecController::Plan& pl = controller_.last_plan();
      std::fprintf(stderr,
                   "spec-trace base=%zu planned=%zu n=%zu drafted=%zu seqs=%zu spec_seqs=%zu "
                   "probe=%d pos=%.0f pred_base_us=%.1f pred_us=%.1f extra_us=%.1f "
                   "extra_se_us=%.1f propose_us=%.1f forward_us=%.1f emit_us=%.1f\n",
                   pl.base_tokens, pl.n_tokens, n_tokens, n_drafted, step_.batch.size(), pl.n_spec,
                   pl.probe ? 1 : 0, positions, 1e6 * pl.base_cost, 1e6 * pl.cost, 1e6 * pl.extra,
                   1e6 * pl.extra_se, 1e6 * seconds(t0 - t_propose), 1e6 * seconds(t_forward - t0),
                   1e6 * seconds(t_end - t_forward));
    }
  }

  // Requests whose every sample finished leave now (not earlier: this step's lists still
  // pointed at their sequences).
  for (auto it = requests_.begin(); it != requests_.end();) {
    if (it->second->open_samples == 0) {
      seqs_.erase(it->first);
      it = requests_.erase(it);
      in_flight_.fetch_sub(1);
    } else {
      ++it;
    }
  }
  refresh_gauges(/*ran_step=*/true);
  return true;
}

void Engine::refresh_gauges(bool ran_step) {
  // Requests, not samples: a request counts as running when any of its samples runs.
  ++gauge_mark_;
  size_t running = 0, waiting = 0;
  for (Sequence* s : scheduler_.running()) {
    if (s->req->gauge_mark != gauge_mark_) {
      s->req->gauge_mark = gauge_mark_;
      ++running;
    }
  }
  for (Sequence* s : scheduler_.waiting()) {
    if (s->req->gauge_mark != gauge_mark_) {
      s->req->gauge_mark = gauge_mark_;
      ++waiting;
    }
  }
  std::lock_guard<std::mutex> lock(metrics_mu_);
  metrics_.running = running;
  metrics_.waiting = waiting;
  metrics_.running_seqs = scheduler_.running().size();
  metrics_.waiting_seqs = scheduler_.waiting().size();
  metrics_.kv_used_blocks = blocks_.n_used();
  metrics_.kv_usage = blocks_.usage();
  metrics_.prefix_queries = scheduler_.prefix_query_tokens();
  metrics_.prefix_hits = scheduler_.prefix_hit_tokens();
  metrics_.preemptions = scheduler_.preemptions();
  metrics_.recomputed_tokens = recomputed_tokens_;
  if (ran_step) ++metrics_.steps;
}

std::string Engine::memory_plan() const {
  const ModelConfig& c = model_.config();
  const MemoryPlan& p = plan_;
  char buf[640];
  std::string s;
  std::snprintf(buf, sizeof buf,
                "lift: model %s: %d layers, dim %d, %d heads (%d kv), vocab %d, context %d; "
                "weights %s\n",
                c.name.c_str(), c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.n_vocab,
                c.context_length, format_bytes(model_.weight_bytes()).c_str());
  s += buf;
  const std::string len_from =
      cfg_.max_model_len > 0 ? "--max-model-len"
      : !p.max_model_len_note.empty()
          ? p.max_model_len_note
          : "the model's context, at most " + std::to_string(kDefaultMaxModelLen);
  std::snprintf(buf, sizeof buf, "lift: max-model-len %zu tokens (%s; -c to change)\n",
                p.max_model_len, len_from.c_str());
  s += buf;
  if (const std::string& set = model_.rope_factor_set(); !set.empty()) {
    std::snprintf(buf, sizeof buf,
                  "lift: LongRoPE %s factors (max-model-len %s the original context %d)\n",
                  set.c_str(), set == "long" ? ">" : "<=", c.rope_orig_ctx);
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "lift: KV cache %s (%s), %zu bytes per token: %zu blocks of %zu tokens = %zu "
                "tokens, %s, %zu full-length sequences at once; budget %s (%s); prefix caching "
                "%s\n",
                kv_type_name(kv_.type()), p.kv_type_from.c_str(), kv_.bytes_per_token(),
                kv_.n_blocks(), kv_.block_size(), kv_.n_blocks() * kv_.block_size(),
                format_bytes(kv_.total_bytes()).c_str(), p.full_sequences(),
                format_bytes(p.budget_bytes).c_str(), p.budget_from.c_str(),
                cfg_.prefix_caching ? "on" : "off");
  s += buf;
  if (p.draft_bytes_per_token > 0) {
    std::snprintf(buf, sizeof buf,
                  "lift: speculative draft model %s shares the blocks: %zu of each token's %zu "
                  "bytes are its K/V\n",
                  cfg_.spec.draft_model->config().name.c_str(), p.draft_bytes_per_token,
                  p.bytes_per_token);
    s += buf;
  }
  if (const size_t w = scheduler_.config().kv_window; w > 0) {
    std::snprintf(buf, sizeof buf,
                  "lift: sliding window %zu on every layer: a sequence holds at most %zu blocks, "
                  "older ones go back to the pool\n",
                  w, p.seq_blocks);
    s += buf;
  }
  return s;
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lock(metrics_mu_);
  return metrics_;
}

void Engine::run_until_idle() {
  while (in_flight_.load() > 0) {
    if (!step() && in_flight_.load() > 0) {
      std::lock_guard<std::mutex> lock(inbox_mu_);
      if (inbox_.empty() && aborts_.empty())
        throw Error("internal: engine idle with requests in flight");
    }
  }
}

void Engine::loop() {
  while (!stop_.load()) {
    {
      std::unique_lock<std::mutex> lock(inbox_mu_);
      inbox_cv_.wait(lock, [&] {
        return stop_.load() || !inbox_.empty() || !aborts_.empty() || scheduler_.has_work();
      });
    }
    if (stop_.load()) break;
    try {
      step();
    } catch (const std::exception& e) {
      fail_all(e.what());
    }
  }
  // Close every stream so no reader waits forever.
  drain_inbox();
  for (auto& [id, req] : requests_) abort(id);
  drain_inbox();
}

void Engine::fail_all(const std::string& why) {
  // A failed step leaves no request half-alive: every sample ends with the error and every
  // KV block comes back.
  for (auto& [id, group] : seqs_) {
    end_request(id, FinishReason::error, why);
    in_flight_.fetch_sub(1);
  }
  seqs_.clear();
  requests_.clear();
  refresh_gauges();  // the failed step never reached its own refresh
}

void Engine::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    stop_.store(false);
  }
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    stop_.store(true);
  }
  inbox_cv_.notify_all();
  thread_.join();
}

}  // namespace lift
