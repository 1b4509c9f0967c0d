#include "engine/draft_proposer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "engine/rng.h"
#include "engine/spec_verify.h"
#include "model/forward_batch.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace lift {

namespace {

// A token's text for an error message: printable ASCII kept, other bytes as \xNN.
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f && c != '\\') {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      out += buf;
    }
  }
  return out + "'";
}

// Throws unless the draft can serve the target; returns the target's EOS id (for min_tokens).
int32_t checked_eos(const LlamaModel& draft, const LlamaModel& target) {
  const ModelConfig &d = draft.config(), &t = target.config();
  for (const auto& [who, cfg] : {std::pair{"target", &t}, std::pair{"draft", &d}}) {
    if (cfg->kv_window() > 0) {
      throw Error(std::string("speculative decoding with a draft model: the ") + who +
                  " model has a sliding window (" + std::to_string(cfg->kv_window()) +
                  " positions) on every layer, whose old KV blocks the engine gives back; a "
                  "draft model is not supported with that yet (use --spec ngram)");
    }
  }
  const std::string pair = " (draft " + draft.file().path() + ", target " + target.file().path() +
                           "): a draft model must have the target's vocabulary";
  if (d.n_vocab != t.n_vocab) {
    throw Error("the draft model's vocabulary has " + std::to_string(d.n_vocab) +
                " tokens, the target's " + std::to_string(t.n_vocab) + pair);
  }
  const Vocab dv = Vocab::from_gguf(draft.file()), tv = Vocab::from_gguf(target.file());
  if (dv.size() != tv.size()) {
    throw Error("the draft model's tokenizer has " + std::to_string(dv.size()) +
                " tokens, the target's " + std::to_string(tv.size()) + pair);
  }
  for (int32_t id = 0; id < dv.size(); ++id) {
    if (dv.text(id) != tv.text(id)) {
      throw Error("token " + std::to_string(id) + " is " + quoted(dv.text(id)) +
                  " in the draft model and " + quoted(tv.text(id)) + " in the target" + pair);
    }
    if (dv.type(id) != tv.type(id)) {
      throw Error("token " + std::to_string(id) + " " + quoted(dv.text(id)) + " has type " +
                  std::to_string(static_cast<int>(dv.type(id))) + " in the draft model and " +
                  std::to_string(static_cast<int>(tv.type(id))) + " in the target" + pair);
    }
  }
  return tv.eos_id();
}

bool finishes(const RequestParams& p, int32_t eos_id, int32_t token) {
  if (token == eos_id && !p.ignore_eos) return true;
  return std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
         p.stop_token_ids.end();
}

}  // namespace

DraftModelProposer::DraftModelProposer(LlamaModel& draft, const LlamaModel& target,
                                       Backend& backend, size_t n_blocks, size_t block_size,
                                       KvType kv_type)
    : eos_id_(checked_eos(draft, target)),
      draft_(draft),
      backend_(backend),
      kv_(draft.config(), n_blocks, block_size, kv_type),
      sampler_(draft.config().n_vocab),
      vocab_(static_cast<size_t>(draft.config().n_vocab)),
      held_(n_blocks, 0),
      prior_pass_seconds_(static_cast<double>(draft.weight_bytes()) / kPriorBytesPerSecond) {}

int32_t DraftModelProposer::token_at(const DraftRequest& r, const Draft& d, size_t pos) const {
  const std::vector<int32_t>& t = r.seq->tokens;
  return pos < t.size() ? t[pos] : d.tokens[pos - t.size()];
}

// What a block not full (or not committed) yet holds: this sequence's draft K/V at this index of
// its table. Top bit set, so it is no block hash the engine would make (2^-63 odds otherwise).
uint64_t DraftModelProposer::own_tag(const Sequence& seq, size_t index) {
  return (1ULL << 63) | (seq.id * 0x9e3779b97f4a7c15ULL ^ index);
}

size_t DraftModelProposer::valid_prefix(const Sequence& seq) {
  const BlockTable& t = seq.table;
  const size_t bs = kv_.block_size();
  const size_t n = std::min(t.hashes.size(), t.blocks.size());
  for (size_t m = 0; m < n; ++m) {
    if (t.blocks[m] < 0) return m * bs;
    uint64_t& held = held_[static_cast<size_t>(t.blocks[m])];
    if (held == t.hashes[m]) continue;  // the draft ran this very block, for some sequence
    // Written by this sequence before the target committed it: valid as far as its count goes.
    if (held != own_tag(seq, m)) return m * bs;
    if ((m + 1) * bs > seq.proposer_computed) return std::max(seq.proposer_computed, m * bs);
    held = t.hashes[m];  // known by its hash from now on, for every table that holds it
  }
  return std::max(seq.proposer_computed, n * bs);
}

void DraftModelProposer::mark_written(const Sequence& seq, size_t begin, size_t end) {
  const BlockTable& t = seq.table;
  const size_t bs = kv_.block_size();
  for (size_t i = begin / bs; i * bs < end; ++i) {
    held_[static_cast<size_t>(t.blocks[i])] = i < t.hashes.size() ? t.hashes[i] : own_tag(seq, i);
  }
}

size_t DraftModelProposer::build_pass(std::span<const DraftRequest> reqs,
                                      std::span<const Draft> drafts) {
  tokens_.clear();
  positions_.clear();
  tables_.clear();
  logit_rows_.clear();
  row_slot_.clear();
  // Sequences whose whole backlog fits go first (decoding ones: one or two tokens), then the
  // rest take what is left of the pass in chunks; every pass feeds at least one token.
  // A backlog of more than kCatchUpSplit tokens (a probe's, a new request's) leaves its last
  // token to a pass of its own: the first draft then comes from a pass of decode size, whose
  // time is what the controller prices a draft pass by. Priced by catch-up passes instead (tens
  // of rows, and probes ever rarer so their backlogs ever longer), a one-row pass looked as
  // dear as a target step, and a round could stay at probes for a thousand steps
  // (docs/speculative.md).
  size_t budget = kMaxPassTokens;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      Slot& s = slots_[i];
      if (round == 0) s.take = 0;
      if (s.done || s.take > 0) continue;
      size_t want = s.len + drafts[i].tokens.size() - s.fed;
      if (want > kCatchUpSplit) --want;
      if (round == 0 && want > budget) continue;
      s.take = std::min(want, budget);
      budget -= s.take;
    }
  }
  // Prompt-kind rows first (kernels::RowKind), as ModelRunner orders them.
  size_t n_prompt = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.take == 0) continue;
      const Sequence& seq = *reqs[i].seq;
      const size_t end = s.fed + s.take;
      const auto [b, e] = chunk_part(s.fed, end, seq.n_prompt, pass);
      for (size_t p = b; p < e; ++p) {
        tokens_.push_back(token_at(reqs[i], drafts[i], p));
        positions_.push_back(static_cast<int32_t>(p));
        tables_.push_back(seq.table.blocks.data());
      }
      if (b < e && e == s.len + drafts[i].tokens.size()) {
        logit_rows_.push_back(static_cast<int32_t>(tokens_.size() - 1));
        row_slot_.push_back(i);
      }
    }
    if (pass == 0) n_prompt = tokens_.size();
  }
  for (size_t i = 0; i < reqs.size(); ++i) slots_[i].fed += slots_[i].take;
  pass_n_prompt_ = n_prompt;
  return logit_rows_.size();
}

void DraftModelProposer::choose(const DraftRequest& r, Slot& slot, Draft& d,
                                std::span<float> logits) {
  const Sequence& seq = *r.seq;
  const RequestParams& p = seq.req->params;
  const auto position = static_cast<uint64_t>(slot.len - seq.n_prompt + d.tokens.size());
  const auto index = static_cast<uint64_t>(seq.index);
  apply_min_tokens_mask(logits, p, eos_id_, position);
  const std::span<const int32_t> prompt(seq.tokens.data(), seq.n_prompt);
  int32_t token;
  if (Sampler::is_greedy(p.sampling)) {
    token = sampler_.sample(logits, p.sampling, prompt, slot.history, index, position);
  } else {
    const size_t at = d.probs.size();
    d.probs.resize(at + vocab_);
    const std::span<float> q(d.probs.data() + at, vocab_);
    sampler_.distribution(logits, p.sampling, prompt, slot.history, q);
    token = draw_from(q, spec_uniform(p.sampling.seed, SpecDraw::draft, index, position));
  }
  d.tokens.push_back(token);
  slot.history.push_back(token);
  // Proposing another token means running this one at position len + drafts - 1.
  const auto ctx = static_cast<size_t>(draft_.config().context_length);
  slot.done = d.tokens.size() >= r.max_tokens || finishes(p, eos_id_, token) ||
              slot.len + d.tokens.size() > ctx;
}

void DraftModelProposer::propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) {
  if (slots_.size() < reqs.size()) slots_.resize(reqs.size());
  const auto ctx = static_cast<size_t>(draft_.config().context_length);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Sequence& seq = *reqs[i].seq;
    Slot& s = slots_[i];
    s.len = seq.tokens.size();
    if (s.len == 0 || seq.n_prompt > s.len) {
      throw Error("internal: draft proposer: sequence " + std::to_string(seq.id) +
                  " has no token to continue");
    }
    // The last token is fed even if the draft ran it before: its logits give the first guess.
    s.fed = std::min(valid_prefix(seq), s.len - 1);
    const size_t need = s.len - 1 + reqs[i].max_tokens;  // positions run, the last draft's too
    if (seq.table.blocks.size() * kv_.block_size() < need) {
      throw Error("internal: draft proposer: sequence " + std::to_string(seq.id) +
                  " has KV slots " + "for " +
                  std::to_string(seq.table.blocks.size() * kv_.block_size()) + " positions, " +
                  std::to_string(need) + " needed");
    }
    s.done = reqs[i].max_tokens == 0 || s.len > ctx;  // the draft cannot see this far
    s.history.assign(seq.tokens.begin() + static_cast<std::ptrdiff_t>(seq.n_prompt),
                     seq.tokens.end());
  }
  for (;;) {
    const size_t rows = build_pass(reqs, drafts);
    if (tokens_.empty()) break;
    if (logits_.size() < rows * vocab_) logits_.resize(rows * vocab_);
    const auto t0 = std::chrono::steady_clock::now();
    draft_.forward(backend_,
                   ForwardBatch{tokens_, positions_, tables_, logit_rows_, pass_n_prompt_}, kv_,
                   logits_.data());
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (slots_[i].take > 0)
        mark_written(*reqs[i].seq, slots_[i].fed - slots_[i].take, slots_[i].fed);
    }
    for (size_t j = 0; j < rows; ++j) {
      const size_t i = row_slot_[j];
      choose(reqs[i], slots_[i], drafts[i], {logits_.data() + j * vocab_, vocab_});
    }
    record_pass(tokens_.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // Every draft but the last was run: fed = len + drafts - 1.
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].seq->proposer_computed = slots_[i].fed;
}

size_t DraftModelProposer::cost_bucket(size_t rows) {
  size_t b = 0;
  while (b + 1 < kCostBuckets && (size_t{1} << b) < rows) ++b;
  return b;
}

void DraftModelProposer::record_pass(size_t rows, double seconds) {
  double& e = ema_[cost_bucket(rows)];
  e = e == 0 ? seconds : 0.8 * e + 0.2 * seconds;
}

double DraftModelProposer::cost_seconds(size_t n_seqs, size_t k) const {
  if (n_seqs == 0 || k == 0) return 0;
  const size_t b = cost_bucket(n_seqs);
  double pass = ema_[b];
  if (pass == 0) {
    // A pass costs no less with more rows: a larger bucket's time bounds it from above, and
    // so does a smaller one's scaled by the row ratio; the tighter of the two known bounds.
    double bound = 0;
    for (size_t j = b + 1; j < kCostBuckets && bound == 0; ++j) bound = ema_[j];
    for (size_t j = b; j-- > 0;) {
      if (ema_[j] == 0) continue;
      const double scaled =
          ema_[j] * static_cast<double>(n_seqs) / static_cast<double>(size_t{1} << j);
      bound = bound == 0 ? scaled : std::min(bound, scaled);
      break;
    }
    // Nothing measured: the weights streamed once, per 16 rows (beyond a few rows a CPU pass
    // turns compute-bound; erring high only makes the controller more careful). A bound is an
    // upper one and may be far above: the one pass of a probe runs every token the draft has
    // not seen, so a one-row pass was priced at a catch-up of tens of rows (0.6 of a target
    // step against 0.15) and never ran to be measured. The guess caps it.
    const double guess = prior_pass_seconds_ * static_cast<double>((n_seqs + 15) / 16);
    pass = bound > 0 ? std::min(bound, guess) : guess;
  }
  return pass * static_cast<double>(k);
}

}  // namespace lift
