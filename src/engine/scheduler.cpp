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

const char* scheduling_policy_name(SchedulingPolicy p) {
  return p == SchedulingPolicy::priority ? "priority" : "fcfs";
}

SchedulingPolicy parse_scheduling_policy(const std::string& s) {
  if (s == "fcfs") return SchedulingPolicy::fcfs;
  if (s == "priority") return SchedulingPolicy::priority;
  throw Error("unknown scheduling policy '" + s + "' (use fcfs or priority)");
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

namespace {

// Running slots a sequence takes against max_seqs: its request's n until it has forked.
size_t slots(const Sequence* seq) {
  return seq->forked ? 1 : static_cast<size_t>(seq->req->params.n);
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig cfg, BlockManager& blocks) : cfg_(cfg), blocks_(blocks) {
  if (const std::string err = cfg_.validate(); !err.empty()) throw Error(err);
  order_.reserve(cfg_.max_seqs);
}

bool Scheduler::before(const Sequence* a, const Sequence* b) const {
  if (cfg_.scheduling == SchedulingPolicy::priority &&
      a->req->params.priority != b->req->params.priority) {
    return a->req->params.priority < b->req->params.priority;
  }
  if (a->req->arrival != b->req->arrival) return a->req->arrival < b->req->arrival;
  return a->index < b->index;
}

void Scheduler::add_waiting(Sequence* seq) {
  seq->status = SeqStatus::waiting;
  // Stable in the queue's order: a preempted sequence keeps its arrival, so it goes back
  // ahead of everything that arrived after it.
  waiting_.insert(
      std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                       [&](const Sequence* a, const Sequence* b) { return before(a, b); }),
      seq);
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

size_t Scheduler::running_slots() const {
  size_t n = 0;
  for (const Sequence* seq : running_) n += slots(seq);
  return n;
}

Sequence* Scheduler::pick_victim() const {
  if (cfg_.scheduling == SchedulingPolicy::fcfs) return running_.back();  // newest admitted
  // The last in the queue's order: largest priority value, then newest arrival (then the
  // highest sample index).
  Sequence* victim = running_.front();
  for (Sequence* seq : running_) {
    if (before(victim, seq)) victim = seq;
  }
  return victim;
}

void Scheduler::preempt(Sequence* victim, SchedulerOutput& out) {
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  // A prefill chunk's reservation can preempt a sequence already given a decode token
  // this step: take that back too.
  auto it = std::find_if(out.batch.begin(), out.batch.end(),
                         [&](const ScheduledSeq& s) { return s.seq == victim; });
  if (it != out.batch.end()) {
    budget_ += it->n_tokens + it->n_spec;
    out.n_tokens -= it->n_tokens + it->n_spec;
    out.batch.erase(it);
  }
  victim->recompute_from = std::max(victim->recompute_from, victim->n_computed);
  blocks_.free(victim->table);
  victim->n_computed = 0;
  victim->proposer_computed = 0;
  ++preemptions_;
  out.preempted.push_back(victim);
  add_waiting(victim);
}

bool Scheduler::reserve(Sequence* seq, size_t n, SchedulerOutput& out) {
  // Slots already held past the computed tokens (a prompt's, taken at admission) count.
  const size_t held = seq->table.n_tokens - seq->n_computed;
  if (n <= held) return true;
  n -= held;
  while (!blocks_.can_append(seq->table, n)) {
    Sequence* victim = pick_victim();
    preempt(victim, out);
    if (victim == seq) return false;
  }
  const bool ok = blocks_.append_slots(seq->table, n, &out.copies);
  if (!ok) throw Error("internal: block manager refused slots it said it had");
  return true;
}

void Scheduler::take(Sequence* seq, size_t n, SchedulerOutput& out) {
  out.batch.push_back({seq, n});
  out.n_tokens += n;
  budget_ -= n;
}

void Scheduler::schedule(SchedulerOutput& out) {
  out.clear();
  budget_ = cfg_.max_batched_tokens;
  // Preemption takes sequences out of running_ anywhere (under priority, also ahead of the
  // one being served), so the two passes walk the list as the step began and skip victims.
  order_.assign(running_.begin(), running_.end());
  for (Sequence* seq : order_) slide(seq);

  // 1. One decode token for every running sequence past its prompt, oldest first, plus the
  // slots for its drafts from the budget no decode token needs.
  size_t decoding = 0;
  for (const Sequence* seq : order_) decoding += seq->in_prefill() ? 0 : 1;
  size_t spare = budget_ > decoding ? budget_ - decoding : 0;
  for (Sequence* seq : order_) {
    if (budget_ == 0) break;
    if (seq->status != SeqStatus::running || seq->in_prefill()) continue;
    size_t k = std::min(seq->spec_k, spare);
    const size_t held = seq->table.n_tokens - seq->n_computed;
    if (k > 0 && 1 + k > held && !blocks_.can_append(seq->table, 1 + k - held)) k = 0;
    if (reserve(seq, 1 + k, out)) {
      take(seq, 1, out);
      out.batch.back().n_spec = k;
      out.n_tokens += k;
      budget_ -= k;
      spare -= k;
    }
  }

  // 2. Prompt chunks of running sequences still in prefill (their blocks are held already).
  for (Sequence* seq : order_) {
    if (budget_ == 0) break;
    if (seq->status != SeqStatus::running || !seq->in_prefill()) continue;
    const size_t n = std::min({seq->remaining(), cfg_.max_prefill_chunk, budget_});
    if (reserve(seq, n, out)) take(seq, n, out);
  }

  // 3. Admissions, unless this step had to preempt.
  if (out.preempted.empty()) admit(out);
#ifndef NDEBUG
  check(out);
#endif
}

void Scheduler::slide(Sequence* seq) {
  const size_t w = cfg_.kv_window;
  if (w > 0 && seq->n_computed + 1 > w) blocks_.release_before(seq->table, seq->n_computed + 1 - w);
}

void Scheduler::admit(SchedulerOutput& out) {
  // A static batch is formed once, when the engine is empty, from as many waiting sequences
  // as fit (their prompts may take several steps), then closed until every member finishes.
  // Sequential runs one request at a time.
  if (cfg_.policy == BatchPolicy::static_batch && running_.empty()) static_open_ = true;
  if (cfg_.policy == BatchPolicy::static_batch && !static_open_) return;
  if (cfg_.policy == BatchPolicy::sequential && !running_.empty()) return;
  size_t used_slots = running_slots();
  while (budget_ > 0 && !waiting_.empty()) {
    Sequence* seq = waiting_.front();
    // First come (by the queue's order), first served: nobody overtakes the head.
    if (used_slots + slots(seq) > cfg_.max_seqs) break;
    if (seq->table.empty()) {
      seq->n_computed = blocks_.allocate_prompt(seq->table, seq->tokens, seq->n_prompt);
      slide(seq);  // a long cached prefix may lie mostly outside the window
    }
    // Every token still to compute gets its slot now, so the prefill never needs a block
    // it might not get; under a sliding window only the first chunk's (see the top).
    const size_t n = std::min({seq->remaining(), cfg_.max_prefill_chunk, budget_});
    const size_t hold = cfg_.kv_window > 0 ? n : seq->remaining();
    if (!blocks_.can_append(seq->table, hold)) {
      // Its cached prefix blocks go back until memory frees up.
      blocks_.free(seq->table);
      seq->n_computed = 0;
      break;
    }
    waiting_.pop_front();
    add_running(seq);
    used_slots += slots(seq);
    prefix_query_tokens_ += seq->tokens.size();
    prefix_hit_tokens_ += seq->n_computed;
    if (!blocks_.append_slots(seq->table, hold, &out.copies)) {
      throw Error("internal: block manager refused slots it said it had");
    }
    take(seq, n, out);
    if (cfg_.policy == BatchPolicy::sequential) break;
  }
  if (cfg_.policy == BatchPolicy::static_batch && budget_ > 0) static_open_ = false;
}

void Scheduler::check(const SchedulerOutput& out) const {
  size_t total = 0;
  for (size_t i = 0; i < out.batch.size(); ++i) {
    const ScheduledSeq& s = out.batch[i];
    total += s.n_tokens + s.n_spec;
    if (s.n_tokens == 0 || s.n_tokens > s.seq->remaining() ||
        (s.n_spec > 0 && (s.n_tokens != 1 || s.seq->in_prefill()))) {
      throw Error("scheduler: bad token count for a sequence");
    }
    for (size_t j = 0; j < i; ++j) {
      if (out.batch[j].seq == s.seq) throw Error("scheduler: a sequence was scheduled twice");
    }
    if (s.seq->table.n_tokens < s.seq->n_computed + s.n_tokens + s.n_spec) {
      throw Error("scheduler: a sequence was scheduled without KV slots");
    }
  }
  if (total != out.n_tokens || total > cfg_.max_batched_tokens) {
    throw Error("scheduler: the token budget was exceeded");
  }
  if (running_slots() > cfg_.max_seqs) {
    throw Error("scheduler: more running samples than max-seqs");
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
