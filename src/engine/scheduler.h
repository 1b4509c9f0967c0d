// Iteration-level scheduling (continuous batching, as in Orca and vLLM): every step, decode
// tokens of running sequences go first, then prompt chunks fill the rest of a token budget.
// One request takes at most max_prefill_chunk tokens a step, so a short request arriving
// behind a long prompt starts at once, and nobody's decoding stalls for a whole prefill.
//
// Admission. The head of the waiting queue is admitted when its whole prompt's blocks fit
// (they are all taken at once: a prompt that has started never needs another block for its
// prefill, so it cannot preempt itself or anyone halfway through) and when all n of its
// samples fit under max_seqs (forked samples run as sequences of their own). Nobody overtakes
// the head. A step that preempted admits nobody: the blocks just given back are for the
// sequences still running, and a victim is never readmitted in the step that preempted it.
//
// Sliding windows. When every layer of the model attends only to the last kv_window positions,
// each step first gives back the blocks a running sequence's window has left behind
// (BlockManager::release_before), and a prompt holds blocks one chunk at a time: admission
// takes slots for its first chunk, each later chunk reserves its own like a decode token does
// (and may preempt). A sequence then holds O(window + chunk) blocks, however long it grows.
// With some global layers (Gemma 2 and 3 alternate) nothing is released: one block holds a
// position's K/V for every layer, and the global layers read every position. Freeing the
// sliding layers' share would take a second pool and block table for those layers (vLLM's
// hybrid allocator): per layer group its own blocks, budget and prefix-cache entries, and
// attention told which table each layer reads.
//
// Speculative decoding. A decoding sequence with spec_k > 0 (engine/spec_controller.h) gets
// slots and budget for up to spec_k draft tokens after its decode token, from what the step
// has left once every decoding sequence has its one token, and only from free blocks: drafts
// never preempt anyone; short of blocks or budget, the draft is cut (to 0 if need be).
//
// Preemption. When the pool cannot give a running sequence its next block, a victim's blocks
// are released and it goes back to the waiting queue at its old place (its arrival), to be
// recomputed (its full blocks usually come back from the prefix cache). The victim is, under
// fcfs, the most recently admitted sequence; under priority, the one with the largest
// priority value, newest arrival first.
//
// Order and starvation (SchedulingPolicy):
//   fcfs      waiting sequences in arrival order; the priority field is ignored. Nothing
//             starves: the oldest running sequence is never preempted while another runs
//             (and alone it always fits: add_request checks that every request fits in the
//             pool), so it finishes within max_tokens decode steps, and the head of the queue
//             is admitted once what runs has given back enough blocks. No later arrival gets
//             ahead of a waiting request, so it waits at most for the work of those that
//             arrived before it or were running when it was preempted.
//   priority  waiting sequences by (priority, arrival), lower value first (vLLM). Within one
//             priority level this is fcfs, with the same bound. Across levels it is strict:
//             a request waits while any request of a better (lower) level waits or runs ahead
//             of it, and it is the first victim when memory runs short, so a steady stream of
//             better-priority requests starves it without bound (there is no aging). It is
//             bounded again once better-priority arrivals stop. A running sequence is never
//             preempted to admit a waiting one, whatever their priorities.
//
// Pure policy: no tensors, no threads. The engine applies its decisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "engine/sequence.h"
#include "kv/block_manager.h"

namespace lift {

enum class BatchPolicy { continuous, static_batch, sequential };
const char* batch_policy_name(BatchPolicy p);
BatchPolicy parse_batch_policy(const std::string& s);

// Who is served first (see the top of this file): fcfs ignores RequestParams::priority.
enum class SchedulingPolicy { fcfs, priority };
const char* scheduling_policy_name(SchedulingPolicy p);
SchedulingPolicy parse_scheduling_policy(const std::string& s);  // "fcfs" or "priority"

struct SchedulerConfig {
  size_t max_batched_tokens = 512;
  size_t max_seqs = 64;  // running sequences; a request of n samples takes n
  size_t max_prefill_chunk = 256;
  size_t kv_window = 0;  // > 0: every layer looks at most this many positions back
  BatchPolicy policy = BatchPolicy::continuous;
  SchedulingPolicy scheduling = SchedulingPolicy::fcfs;
  // Whether RequestParams::priority matters; with fcfs a front end should reject a non-zero
  // priority rather than ignore it.
  bool priority_scheduling() const { return scheduling == SchedulingPolicy::priority; }
  std::string validate() const;
};

struct ScheduledSeq {
  Sequence* seq;
  size_t n_tokens;    // tokens of seq computed this step, from seq->n_computed
  size_t n_spec = 0;  // draft tokens it may add (slots and budget held for them)
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> batch;
  std::vector<std::pair<int32_t, int32_t>> copies;  // copy-on-write block copies to do first
  std::vector<Sequence*> preempted;
  size_t n_tokens = 0;
  void clear() {
    batch.clear();
    copies.clear();
    preempted.clear();
    n_tokens = 0;
  }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig cfg, BlockManager& blocks);

  const SchedulerConfig& config() const { return cfg_; }
  // A new sequence joins the waiting queue: by arrival (fcfs) or (priority, arrival).
  void add_waiting(Sequence* seq);
  // A sequence forked from a running one starts running at once.
  void add_running(Sequence* seq);
  // Drops a finished or aborted sequence and releases its blocks.
  void remove(Sequence* seq);

  // Decides this step's batch; fills `out` (reused between steps to avoid allocation).
  void schedule(SchedulerOutput& out);
  // Throws lift::Error if a step broke the rules: budget exceeded, a decodable running
  // sequence left out, a sequence scheduled twice. Run every step in debug builds.
  void check(const SchedulerOutput& out) const;

  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  uint64_t preemptions() const { return preemptions_; }
  // Running slots taken against max_seqs: one per running sequence, n for a running request
  // that has not forked its samples yet.
  size_t running_slots() const;
  // Prefix cache, counted once per admission (vLLM's meaning): tokens looked up (all of a
  // sequence's tokens to compute) and of those, tokens whose K/V was found.
  uint64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  uint64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

 private:
  // Whether a should be served before b (the waiting queue's order).
  bool before(const Sequence* a, const Sequence* b) const;
  Sequence* pick_victim() const;
  void preempt(Sequence* victim, SchedulerOutput& out);
  // Gives seq slots up to n_computed + n (a prompt's may be held already), preempting victims
  // if the pool is short. False if seq itself had to be preempted.
  bool reserve(Sequence* seq, size_t n, SchedulerOutput& out);
  // Puts n tokens of seq into the step.
  void take(Sequence* seq, size_t n, SchedulerOutput& out);
  // Admits waiting sequences into the rest of the step.
  void admit(SchedulerOutput& out);
  // Gives back seq's blocks before the window of its next token (with kv_window > 0).
  void slide(Sequence* seq);

  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::vector<Sequence*> running_;  // in admission order
  std::vector<Sequence*> order_;    // scratch: running_ as the step began
  std::deque<Sequence*> waiting_;
  size_t budget_ = 0;         // tokens left in the step being scheduled
  bool static_open_ = false;  // static batching: the batch is still being formed
  uint64_t admissions_ = 0;
  uint64_t preemptions_ = 0;
  uint64_t prefix_query_tokens_ = 0;
  uint64_t prefix_hit_tokens_ = 0;
};

}  // namespace lift
