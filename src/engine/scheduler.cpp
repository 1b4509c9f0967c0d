#include "engine/scheduler.h"

#include <algorithm>

#include "util/error.h"

namespace lift {

const char* batch_policy_name(BatchPolicy p) {
  switch (p) {
    case BatchPolicy::static_batch:
      return "static";
    case BatchPolicy::sequential:
      return "sequential";
    default:
      return "continuous";
  }
}

BatchPolicy parse_batch_policy(const std::string& s) {
  if (s == "continuous") return BatchPolicy::continuous;
  if (s == "static") return BatchPolicy::static_batch;
  if (s == "sequential") return BatchPolicy::sequential;
  throw Error("unknown scheduler '" + s + "' (use sequential, static or continuous)");
}

std::string SchedulerConfig::validate() const {
  if (max_batched_tokens < 1) return "max-batched-tokens must be at least 1";
  if (max_seqs < 1) return "max-seqs must be at least 1";
  if (max_prefill_chunk < 1) return "max-prefill-chunk must be at least 1";
  if (max_seqs > max_batched_tokens) {
    return "max-seqs (" + std::to_string(max_seqs) + ") must not exceed max-batched-tokens (" +
           std::to_string(max_batched_tokens) + "): every running sequence decodes each step";
  }
  return {};
}

Scheduler::Scheduler(SchedulerConfig cfg, BlockManager& blocks) : cfg_(cfg), blocks_(blocks) {
  if (const std::string err = cfg_.validate(); !err.empty()) throw Error(err);
  if (cfg_.policy == BatchPolicy::sequential) cfg_.max_seqs = 1;
}

void Scheduler::add_waiting(Sequence* seq) {
  seq->status = SeqStatus::waiting;
  // Stable by (priority, arrival): a preempted sequence keeps its arrival, so it goes back
  // ahead of everything that arrived after it.
  auto before = [](const Sequence* a, const Sequence* b) {
    if (a->req->params.priority != b->req->params.priority) {
      return a->req->params.priority < b->req->params.priority;
    }
    if (a->req->arrival != b->req->arrival) return a->req->arrival < b->req->arrival;
    return a->index < b->index;
  };
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, before), seq);
}

void Scheduler::add_running(Sequence* seq) {
  seq->status = SeqStatus::running;
  seq->admitted = ++admissions_;
  running_.push_back(seq);
}

void Scheduler::remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    running_.erase(it);
  }
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) {
    waiting_.erase(it);
  }
  blocks_.free(seq->table);
  seq->status = SeqStatus::finished;
}

void Scheduler::preempt(Sequence* victim, SchedulerOutput& out) {
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  // A prefill chunk's reservation can preempt a sequence already given a decode token
  // this step: take that back too.
  auto it = std::find_if(out.batch.begin(), out.batch.end(),
                         [&](const ScheduledSeq& s) { return s.seq == victim; });
  if (it != out.batch.end()) {
    budget_ += it->n_tokens;
    out.n_tokens -= it->n_tokens;
    out.batch.erase(it);
  }
  victim->recompute_from = std::max(victim->recompute_from, victim->n_computed);
  blocks_.free(victim->table);
  victim->n_computed = 0;
  ++preemptions_;
  out.preempted.push_back(victim);
  add_waiting(victim);
}

bool Scheduler::reserve(Sequence* seq, size_t n, SchedulerOutput& out) {
  while (!blocks_.can_append(seq->table, n)) {
    Sequence* victim = running_.back();  // most recently admitted
    preempt(victim, out);
    if (victim == seq) return false;
  }
  const bool ok = blocks_.append_slots(seq->table, n, &out.copies);
  if (!ok) throw Error("internal: block manager refused slots it said it had");
  return true;
}

void Scheduler::schedule(SchedulerOutput& out) {
  out.clear();
  budget_ = cfg_.max_batched_tokens;
  size_t& budget = budget_;
  auto take = [&](Sequence* seq, size_t n) {
    out.batch.push_back({seq, n});
    out.n_tokens += n;
    budget -= n;
  };

  // 1. One decode token for every running sequence past its prompt, oldest first. A sequence
  //    preempted here drops out of running_, so the index only advances when it stays.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->in_prefill()) {
      ++i;
      continue;
    }
    if (!reserve(seq, 1, out)) continue;  // seq itself was preempted (it was last)
    take(seq, 1);
    ++i;
  }

  // 2. Prompt chunks of running sequences still in prefill.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (!seq->in_prefill()) {
      ++i;
      continue;
    }
    const size_t n = std::min({seq->remaining(), cfg_.max_prefill_chunk, budget});
    if (!reserve(seq, n, out)) continue;
    take(seq, n);
    ++i;
  }

  // 3. Admit waiting sequences while there is budget, room and memory. Sequential runs one
  //    at a time.
  // A static batch is formed once, when the engine is empty, from as many waiting sequences
  // as fit (their prompts may take several steps), then closed until every member finishes.
  if (cfg_.policy == BatchPolicy::static_batch && running_.empty()) static_open_ = true;
  const bool may_admit = cfg_.policy != BatchPolicy::static_batch || static_open_;
  while (may_admit && budget > 0 && !waiting_.empty() && running_.size() < cfg_.max_seqs) {
    Sequence* seq = waiting_.front();
    if (seq->table.empty()) {
      seq->n_computed = blocks_.allocate_prompt(seq->table, seq->tokens, seq->n_prompt);
    }
    const size_t n = std::min({seq->remaining(), cfg_.max_prefill_chunk, budget});
    if (!blocks_.can_append(seq->table, n)) {
      // First come, first served: nobody overtakes the head of the queue. Its cached
      // prefix blocks go back until memory frees up.
      blocks_.free(seq->table);
      seq->n_computed = 0;
      break;
    }
    waiting_.pop_front();
    add_running(seq);
    if (!blocks_.append_slots(seq->table, n, &out.copies)) {
      throw Error("internal: block manager refused slots it said it had");
    }
    take(seq, n);
  }
  if (cfg_.policy == BatchPolicy::static_batch && budget > 0) static_open_ = false;
#ifndef NDEBUG
  check(out);
#endif
}

void Scheduler::check(const SchedulerOutput& out) const {
  size_t total = 0;
  for (size_t i = 0; i < out.batch.size(); ++i) {
    const ScheduledSeq& s = out.batch[i];
    total += s.n_tokens;
    if (s.n_tokens == 0 || s.n_tokens > s.seq->remaining()) {
      throw Error("scheduler: bad token count for a sequence");
    }
    for (size_t j = 0; j < i; ++j) {
      if (out.batch[j].seq == s.seq) throw Error("scheduler: a sequence was scheduled twice");
    }
    if (s.seq->table.n_tokens < s.seq->n_computed + s.n_tokens) {
      throw Error("scheduler: a sequence was scheduled without KV slots");
    }
  }
  if (total != out.n_tokens || total > cfg_.max_batched_tokens) {
    throw Error("scheduler: the token budget was exceeded");
  }
  // Decode is never starved: every running sequence past its prompt decodes this step
  // (max_seqs <= max_batched_tokens guarantees the budget for it).
  for (const Sequence* seq : running_) {
    if (seq->in_prefill()) continue;
    const bool scheduled = std::any_of(out.batch.begin(), out.batch.end(),
                                       [&](const ScheduledSeq& s) { return s.seq == seq; });
    if (!scheduled && running_.size() <= cfg_.max_batched_tokens) {
      throw Error("scheduler: a decoding sequence was starved");
    }
  }
}

}  // namespace lift
