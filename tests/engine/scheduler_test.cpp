// Scheduler on its own (no model): a harness plays the engine's part after each step (tokens
// computed, a token sampled at the end of a chunk, forks of n > 1 samples, finished samples
// removed) and checks the scheduler's rules every step.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "engine/memory_plan.h"
#include "util/error.h"

namespace lift {
namespace {

struct Harness {
  BlockManager blocks;
  Scheduler sched;
  std::vector<std::unique_ptr<RequestState>> reqs;
  std::vector<std::unique_ptr<Sequence>> seqs;
  SchedulerOutput out;
  uint64_t next_id = 0;
  size_t max_running = 0;          // most sequences running after any step
  std::vector<Sequence*> started;  // sequences in the order they were first scheduled

  Harness(size_t n_blocks, size_t block_size, SchedulerConfig cfg, bool caching = false)
      : blocks(n_blocks, block_size, caching), sched(cfg, blocks) {}

  // A request of prompt_len tokens (distinct per request) generating max_tokens per sample.
  Sequence* add(size_t prompt_len, int max_tokens, int n = 1, int priority = 0) {
    auto req = std::make_unique<RequestState>();
    req->id = ++next_id;
    req->arrival = req->id;
    req->params.max_tokens = max_tokens;
    req->params.n = n;
    req->params.priority = priority;
    req->n_prompt = static_cast<int>(prompt_len);
    req->open_samples = n;
    auto seq = std::make_unique<Sequence>();
    seq->id = req->id * 1000;
    seq->req = req.get();
    for (size_t i = 0; i < prompt_len; ++i)
      seq->tokens.push_back(static_cast<int32_t>(req->id * 100 + i));
    seq->n_prompt = prompt_len;
    Sequence* s = seq.get();
    sched.add_waiting(s);
    reqs.push_back(std::move(req));
    seqs.push_back(std::move(seq));
    return s;
  }

  bool in_batch(const Sequence* s) const {
    return std::any_of(out.batch.begin(), out.batch.end(),
                       [&](const ScheduledSeq& b) { return b.seq == s; });
  }

  // One step: schedule, then what the engine does with the step's results.
  void step() {
    sched.schedule(out);
    ASSERT_NO_THROW(sched.check(out));
    std::vector<const BlockTable*> tables;
    for (const auto& s : seqs) {
      if (s->status != SeqStatus::finished) tables.push_back(&s->table);
    }
    ASSERT_NO_THROW(blocks.check_invariants(tables));
    std::vector<Sequence*> sampled;
    for (const ScheduledSeq& b : out.batch) {
      if (!b.seq->scheduled_once) started.push_back(b.seq);
      b.seq->n_computed += b.n_tokens;
      b.seq->scheduled_once = true;
      blocks.commit(b.seq->table, b.seq->tokens, b.seq->n_computed, b.seq->n_prompt);
      if (b.seq->n_computed == b.seq->tokens.size()) sampled.push_back(b.seq);
    }
    for (Sequence* s : sampled) {
      std::vector<Sequence*> group{s};
      if (s->req->params.n > 1 && !s->forked) {
        s->forked = true;
        for (int i = 1; i < s->req->params.n; ++i) {
          auto child = std::make_unique<Sequence>();
          child->id = s->id + static_cast<uint64_t>(i);
          child->req = s->req;
          child->index = i;
          child->tokens = s->tokens;
          child->n_prompt = s->n_prompt;
          child->n_computed = s->n_computed;
          child->forked = true;
          child->scheduled_once = true;
          blocks.fork(s->table, child->table);
          sched.add_running(child.get());
          group.push_back(child.get());
          seqs.push_back(std::move(child));
        }
      }
      for (Sequence* g : group) {
        g->tokens.push_back(static_cast<int32_t>(7 + g->index));
        if (g->n_output() >= static_cast<size_t>(g->req->params.max_tokens)) {
          sched.remove(g);
          --g->req->open_samples;
        }
      }
    }
    max_running = std::max(max_running, sched.running().size());
  }

  // Steps until nothing is left (at most `limit` steps).
  void run(size_t limit = 1000) {
    for (size_t i = 0; i < limit && sched.has_work(); ++i) {
      step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_FALSE(sched.has_work());
  }
};

SchedulerConfig config(size_t max_prefill_chunk, size_t max_seqs = 64,
                       SchedulingPolicy policy = SchedulingPolicy::fcfs) {
  SchedulerConfig c;
  c.max_batched_tokens = 256;
  c.max_seqs = max_seqs;
  c.max_prefill_chunk = max_prefill_chunk;
  c.scheduling = policy;
  return c;
}

// A decode that runs out of blocks preempts the newest sequence; the blocks it gives back are
// for the sequences still running, so the victim waits at least until the next step (before,
// it came straight back with a first chunk that fit in what it had just given back).
TEST(Scheduler, PreemptedSequenceIsNotReadmittedInTheSameStep) {
  Harness h(6, 4, config(4));
  Sequence* a = h.add(4, 8);  // 12 tokens: 3 blocks
  Sequence* b = h.add(8, 8);  // 16 tokens: 4 blocks
  bool saw_preemption = false;
  for (int i = 0; i < 100 && h.sched.has_work(); ++i) {
    h.step();
    if (HasFatalFailure()) return;
    for (Sequence* v : h.out.preempted) {
      saw_preemption = true;
      EXPECT_FALSE(h.in_batch(v)) << "step " << i;
      EXPECT_EQ(v->status, SeqStatus::waiting) << "step " << i;
      EXPECT_TRUE(v->table.empty()) << "step " << i;
    }
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_FALSE(h.sched.has_work());
  EXPECT_EQ(a->n_output(), 8u);
  EXPECT_EQ(b->n_output(), 8u);
}

// A 12-token prompt (3 blocks) arrives while a decoding request holds 2 of the 4 blocks: it is
// admitted only once all its blocks fit, so it never starts a prefill it cannot finish (before,
// its first chunk got in and its third chunk preempted the prompt itself).
TEST(Scheduler, AdmissionNeedsTheWholePromptSoPrefillNeverPreemptsItself) {
  Harness h(4, 4, config(4));
  Sequence* a = h.add(4, 4);
  h.step();
  Sequence* b = h.add(12, 1);
  h.run();
  EXPECT_EQ(h.sched.preemptions(), 0u);
  EXPECT_EQ(a->n_output(), 4u);
  EXPECT_EQ(b->n_output(), 1u);
}

// Once admitted, a prompt's later chunks need no new block: the blocks of the whole prompt are
// held from admission on.
TEST(Scheduler, AdmissionHoldsTheWholePromptsBlocks) {
  Harness h(16, 4, config(4));
  Sequence* a = h.add(14, 2);
  h.step();
  EXPECT_EQ(a->n_computed, 4u);
  EXPECT_EQ(a->table.n_tokens, 14u);
  EXPECT_EQ(a->table.blocks.size(), 4u);
  h.run();
}

// n samples take n of --max-seqs once forked, so a request is admitted only when all of them
// fit beside what runs.
TEST(Scheduler, ForkedSamplesCountAgainstMaxSeqs) {
  Harness h(64, 4, config(64, 4));
  Sequence* r1 = h.add(6, 5, /*n=*/3);
  Sequence* r2 = h.add(6, 5, /*n=*/2);
  h.step();
  EXPECT_TRUE(h.in_batch(r1));
  EXPECT_FALSE(h.in_batch(r2));  // 3 + 2 samples > 4
  EXPECT_EQ(r2->status, SeqStatus::waiting);
  h.run();
  EXPECT_LE(h.max_running, 4u);
  EXPECT_EQ(r2->n_output(), 5u);
}

// Preempted forked samples each take one slot again; a preempted parent that has not forked
// yet still needs all n.
TEST(Scheduler, MaxSeqsHoldsUnderPreemptionOfForkedSamples) {
  Harness h(10, 4, config(8, 5));
  h.add(7, 12, /*n=*/3);
  h.add(5, 12, /*n=*/2);
  h.add(9, 12, /*n=*/1);
  h.add(3, 12, /*n=*/4);
  h.run();
  EXPECT_GT(h.sched.preemptions(), 0u);
  EXPECT_LE(h.max_running, 5u);
}

TEST(Scheduler, PolicyNamesParse) {
  EXPECT_EQ(parse_scheduling_policy("fcfs"), SchedulingPolicy::fcfs);
  EXPECT_EQ(parse_scheduling_policy("priority"), SchedulingPolicy::priority);
  EXPECT_STREQ(scheduling_policy_name(SchedulingPolicy::priority), "priority");
  EXPECT_THROW(parse_scheduling_policy("lifo"), Error);
  EXPECT_FALSE(SchedulerConfig{}.priority_scheduling());  // fcfs by default
}

// One sequence at a time: fcfs serves in arrival order whatever the priorities, priority by
// (priority, arrival), lower value first.
TEST(Scheduler, FcfsIgnoresPriorityAndPriorityPolicyOrdersByIt) {
  for (SchedulingPolicy policy : {SchedulingPolicy::fcfs, SchedulingPolicy::priority}) {
    Harness h(64, 4, config(64, 1, policy));
    Sequence* a = h.add(4, 2, 1, /*priority=*/5);
    Sequence* b = h.add(4, 2, 1, /*priority=*/0);
    Sequence* c = h.add(4, 2, 1, /*priority=*/-3);
    Sequence* d = h.add(4, 2, 1, /*priority=*/0);
    h.run();
    if (HasFatalFailure()) return;
    const std::vector<Sequence*> want = policy == SchedulingPolicy::fcfs
                                            ? std::vector<Sequence*>{a, b, c, d}
                                            : std::vector<Sequence*>{c, b, d, a};
    EXPECT_EQ(h.started, want) << scheduling_policy_name(policy);
  }
}

// y (priority 9) runs first; x and z (priority 0) arrive and are admitted after it. When x
// runs out of blocks, fcfs preempts the newest admitted (z) and priority the worst priority
// (y), although y was admitted first and has already been given its decode token this step.
// Preempted, each waits at its old place: behind better priorities, ahead of later arrivals
// of its own.
TEST(Scheduler, PreemptionVictimAndReadmissionPlaceFollowThePolicy) {
  for (SchedulingPolicy policy : {SchedulingPolicy::fcfs, SchedulingPolicy::priority}) {
    SCOPED_TRACE(scheduling_policy_name(policy));
    Harness h(4, 4, config(64, 64, policy));
    Sequence* y = h.add(3, 12, 1, /*priority=*/9);
    h.step();
    Sequence* x = h.add(3, 12, 1, /*priority=*/0);
    Sequence* z = h.add(3, 12, 1, /*priority=*/0);
    for (int i = 0; i < 2; ++i) {
      h.step();
      if (HasFatalFailure()) return;
      EXPECT_TRUE(h.out.preempted.empty());
    }
    h.step();  // x needs its second block: none is left
    if (HasFatalFailure()) return;
    Sequence* victim = policy == SchedulingPolicy::fcfs ? z : y;
    ASSERT_EQ(h.out.preempted, std::vector<Sequence*>{victim});
    EXPECT_FALSE(h.in_batch(victim));
    EXPECT_TRUE(h.in_batch(x));
    EXPECT_TRUE(h.in_batch(policy == SchedulingPolicy::fcfs ? y : z));
    Sequence* w = h.add(3, 4, 1, /*priority=*/9);
    Sequence* v = h.add(3, 4, 1, /*priority=*/0);
    const std::vector<Sequence*> waiting(h.sched.waiting().begin(), h.sched.waiting().end());
    if (policy == SchedulingPolicy::fcfs) {
      EXPECT_EQ(waiting, (std::vector<Sequence*>{z, w, v}));
    } else {
      EXPECT_EQ(waiting, (std::vector<Sequence*>{v, y, w}));
    }
    h.run();
    for (Sequence* s : {x, y, z}) EXPECT_EQ(s->n_output(), 12u);
    for (Sequence* s : {v, w}) EXPECT_EQ(s->n_output(), 4u);
  }
}

// Under priority the best sequence is never the victim while a worse one runs; under both
// policies the oldest (best) request keeps decoding every step once it has started.
TEST(Scheduler, BestSequenceIsNeverPreempted) {
  for (SchedulingPolicy policy : {SchedulingPolicy::fcfs, SchedulingPolicy::priority}) {
    SCOPED_TRACE(scheduling_policy_name(policy));
    Harness h(12, 4, config(8, 64, policy));
    Sequence* best = h.add(5, 30, 1, /*priority=*/-1);
    for (int i = 0; i < 6; ++i) h.add(3 + 2 * static_cast<size_t>(i), 10, 1 + i % 2, i % 3);
    for (int i = 0; i < 200 && h.sched.has_work(); ++i) {
      h.step();
      if (HasFatalFailure()) return;
      for (Sequence* p : h.out.preempted) ASSERT_NE(p, best) << "step " << i;
    }
    EXPECT_GT(h.sched.preemptions(), 0u);
    EXPECT_EQ(best->n_output(), 30u);
    h.run();
  }
}

SchedulerConfig windowed(size_t window, size_t max_prefill_chunk) {
  SchedulerConfig c = config(max_prefill_chunk);
  c.kv_window = window;
  return c;
}

// With a sliding window on every layer a long generation holds the blocks its window spans
// (sequence_blocks), not its length; without one it holds all of them.
TEST(Scheduler, SlidingWindowGenerationHoldsWindowNotLength) {
  for (bool caching : {false, true}) {
    SCOPED_TRACE(caching ? "prefix caching" : "no prefix caching");
    Harness h(64, 4, windowed(8, 4), caching);
    Sequence* s = h.add(30, 200);
    size_t most = 0;
    for (int i = 0; i < 400 && h.sched.has_work(); ++i) {
      h.step();
      if (HasFatalFailure()) return;
      most = std::max(most, h.blocks.n_used());
    }
    EXPECT_EQ(s->n_output(), 200u);
    // A chunk of 4 from position a reads back to a - 7: 11 positions over at most 4 blocks.
    EXPECT_LE(most, sequence_blocks(230, 4, 8, 4));
    EXPECT_GE(most, 2u);
    EXPECT_EQ(h.blocks.n_used(), 0u);
    EXPECT_EQ(h.blocks.n_available(), h.blocks.n_total());
  }
  Harness full(64, 4, config(4));
  full.add(30, 200);
  size_t most = 0;
  for (int i = 0; i < 400 && full.sched.has_work(); ++i) {
    full.step();
    most = std::max(most, full.blocks.n_used());
  }
  // Counted after each step: 228 positions with K/V (the last step's go back with the sequence).
  EXPECT_EQ(most, 57u);
}

// Many windowed sequences in a pool that holds a few windows: preemption and recompute (with
// cached prefixes) still finish everyone, the invariants hold every step, every block returns.
TEST(Scheduler, SlidingWindowWithPreemptionAndPrefixCaching) {
  Harness h(14, 4, windowed(8, 4), /*caching=*/true);
  for (int i = 0; i < 6; ++i) h.add(6 + 5 * static_cast<size_t>(i), 40, 1 + i % 2);
  h.run(2000);
  if (HasFatalFailure()) return;
  EXPECT_GT(h.sched.preemptions(), 0u);
  for (const auto& s : h.seqs) EXPECT_EQ(s->n_output(), 40u);
  EXPECT_EQ(h.blocks.n_used(), 0u);
  EXPECT_EQ(h.blocks.n_available(), h.blocks.n_total());
}

}  // namespace
}  // namespace lift
