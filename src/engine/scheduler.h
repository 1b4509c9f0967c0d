// Iteration-level scheduling (continuous batching, as in Orca and vLLM): every step, decode
// tokens of running sequences go first, then prompt chunks fill the rest of a token budget.
// One request takes at most max_prefill_chunk tokens a step, so a short request arriving
// behind a long prompt starts at once, and nobody's decoding stalls for a whole prefill.
// When the KV pool cannot give a running sequence its next block, the most recently
// admitted sequence is preempted: its blocks are released and it goes back to the front of
// the queue, to be recomputed (its full blocks usually come back from the prefix cache).
//
// Pure policy: no tensors, no threads. The engine applies its decisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "engine/sequence.h"
#include "kv/block_manager.h"

namespace lift {

enum class BatchPolicy { continuous, static_batch, sequential };
const char* batch_policy_name(BatchPolicy p);
BatchPolicy parse_batch_policy(const std::string& s);

struct SchedulerConfig {
  size_t max_batched_tokens = 512;
  size_t max_seqs = 64;
  size_t max_prefill_chunk = 256;
  BatchPolicy policy = BatchPolicy::continuous;
  std::string validate() const;
};

struct ScheduledSeq {
  Sequence* seq;
  size_t n_tokens;  // tokens of seq computed this step, from seq->n_computed
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
  // A new sequence joins the waiting queue, ordered by (priority, arrival).
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

 private:
  void preempt(Sequence* victim, SchedulerOutput& out);
  // Grows seq's table by n slots, preempting later-admitted sequences if the pool is short.
  // False if seq itself had to be preempted.
  bool reserve(Sequence* seq, size_t n, SchedulerOutput& out);

  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::vector<Sequence*> running_;  // in admission order
  std::deque<Sequence*> waiting_;
  size_t budget_ = 0;         // tokens left in the step being scheduled
  bool static_open_ = false;  // static batching: the batch is still being formed
  uint64_t admissions_ = 0;
  uint64_t preemptions_ = 0;
};

}  // namespace lift
