// The speculation controller against simulated steps whose cost follows a known law plus the
// noise of a shared machine (positive, with stalls): where every row costs its share, drafts
// are turned down nearly always (only probes run); where rows are nearly free, they are taken.
// And the step cost model: it recovers a line through noisy steps, tells how sure it is, and is
// not fooled by counts measured long ago.
#include "engine/spec_controller.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string_view>

#include "engine/ngram_proposer.h"
#include "engine/request.h"
#include "engine/spec_cost_model.h"

namespace lift {
namespace {

// What one simulated step costs: a fixed part, a part per row and one per attended position.
struct CostLaw {
  double fixed, per_row, per_position;
  double operator()(size_t n, double positions) const {
    return fixed + per_row * static_cast<double>(n) + per_position * positions;
  }
};

// Timing noise as a busy machine makes it: a few percent always, more now and then, and a
// stall (another process took the core) on some steps. It only ever adds.
class Noise {
 public:
  explicit Noise(uint32_t seed, double stall_rate = 0.05) : rng_(seed), stall_rate_(stall_rate) {}
  double operator()(double seconds) {
    const double jitter = std::abs(normal_(rng_)) * 0.15;
    const double stall = uniform_(rng_) < stall_rate_ ? 1 + 2 * uniform_(rng_) : 0;
    return seconds * (1 + jitter + stall);
  }

 private:
  std::mt19937 rng_;
  double stall_rate_;
  std::normal_distribution<double> normal_{0, 1};
  std::uniform_real_distribution<double> uniform_{0, 1};
};

struct Outcome {
  size_t steps = 0;
  size_t steps_with_drafts = 0;   // any K > 0
  size_t steps_beyond_probe = 0;  // drafts the controller chose, not a probe's single token
  size_t draft_tokens = 0;
};

// Runs `steps` decode steps of n_seqs sequences (contexts from `context` on, growing by the
// tokens each step emits) through the controller, the cost of each from `law` and `noise`,
// each draft token accepted with probability `alpha` (independently), and counts what the
// controller asked for after `warmup` steps.
// A proposer whose time the controller must weigh, like a draft model's: it never proposes
// anything itself (the simulation decides acceptance), it only reports a cost.
class CostlyProposer : public Proposer {
 public:
  explicit CostlyProposer(double seconds) : seconds_(seconds) {}
  std::string_view name() const override { return "costly"; }
  void propose(std::span<const DraftRequest>, std::span<Draft>) override {}
  double cost_seconds(size_t n_seqs, size_t k) const override {
    return seconds_ * static_cast<double>(k) * (n_seqs > 0 ? 1 : 0);
  }

 private:
  double seconds_;
};

// n decoding sequences of `len` tokens each (all computed but the last), owned by `seqs`.
std::vector<Sequence*> decoding(std::vector<std::unique_ptr<Sequence>>& seqs, RequestState& req,
                                size_t n, size_t len) {
  std::vector<Sequence*> running;
  for (size_t i = 0; i < n; ++i) {
    auto s = std::make_unique<Sequence>();
    s->req = &req;
    s->status = SeqStatus::running;
    s->n_prompt = 1;
    s->tokens.assign(len, 5);
    s->n_computed = len - 1;
    running.push_back(s.get());
    seqs.push_back(std::move(s));
  }
  return running;
}

Outcome simulate(size_t n_seqs, size_t context, CostLaw law, Noise noise, double alpha,
                 size_t steps, size_t warmup = 64, uint32_t seed = 7,
                 const Proposer* proposer = nullptr) {
  SpecConfig sc;
  sc.method = SpecMethod::ngram;
  sc.max_tokens = 8;
  NgramProposer ngram_proposer(1, 4);
  const Proposer& ngram = proposer != nullptr ? *proposer : ngram_proposer;
  SpecController c(sc, 512);
  RequestState req;
  req.params.max_tokens = 1 << 20;
  std::vector<std::unique_ptr<Sequence>> seqs;
  const std::vector<Sequence*> running = decoding(seqs, req, n_seqs, context);
  for (size_t i = 0; i < n_seqs; ++i) {  // contexts apart
    running[i]->tokens.resize(context + 13 * i, 5);
    running[i]->n_computed = running[i]->tokens.size() - 1;
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Outcome out;
  for (size_t step = 0; step < steps; ++step) {
    c.plan(running, n_seqs, 1 << 20, ngram);
    size_t n = 0, k_total = 0;
    double positions = 0;
    for (Sequence* s : running) {
      const size_t rows = 1 + s->spec_k;
      positions += static_cast<double>(rows * s->n_computed + rows * (rows + 1) / 2);
      n += rows;
      k_total += s->spec_k;
    }
    c.observe_step(n, noise(law(n, positions)), positions);
    for (Sequence* s : running) {
      size_t accepted = 0;
      while (accepted < s->spec_k && u(rng) < alpha) ++accepted;
      c.observe_draft(*s, s->spec_k, accepted, accepted < s->spec_k);
      s->tokens.insert(s->tokens.end(), accepted + 1, 5);
      s->n_computed = s->tokens.size() - 1;
    }
    if (step < warmup) continue;
    ++out.steps;
    out.draft_tokens += k_total;
    if (k_total > 0) ++out.steps_with_drafts;
    if (!c.last_plan().probe && k_total > 0) ++out.steps_beyond_probe;
  }
  return out;
}

TEST(SpecController, RowsThatCostTheirShareGetNoDraftsAtSixteenSequences) {
  // Attention-dominated like a tiny model: the step is nearly proportional to its rows and
  // their contexts, so at 16 sequences a draft row costs ~6% more for ~3% more tokens.
  const CostLaw law{2e-5, 4e-6, 4e-8};
  for (uint32_t seed : {1u, 2u, 3u}) {
    const Outcome o = simulate(16, 64, law, Noise(seed), 0.46, 1500);
    EXPECT_LE(o.steps_beyond_probe, o.steps / 100) << "seed " << seed;
    // Probes: one token every kProbeInterval steps, no more.
    EXPECT_LE(o.draft_tokens, o.steps / SpecController::kProbeInterval + o.steps / 100)
        << "seed " << seed;
  }
}

TEST(SpecController, ProbesOfAProposerWithACostBackOffWhileTheyDoNotPay) {
  // A draft that is never accepted, on a memory-bound target: every probe makes the draft
  // catch up on the tokens it missed, so probes must become rare, not stay one per 8 steps.
  const CostLaw law{1e-3, 1e-5, 0};
  const CostlyProposer draft(1e-4);
  const Outcome o = simulate(4, 64, law, Noise(10), 0.0, 4000, 64, 7, &draft);
  EXPECT_EQ(o.steps_beyond_probe, 0u);
  // Doubling from 8 to 1024 steps, then one per 1024: at most a dozen in 4,000 steps.
  EXPECT_LE(o.draft_tokens, 12u);
  EXPECT_GE(o.draft_tokens, 3u);  // but still some: the estimate is kept alive
  // The free n-gram lookup keeps its probe every kProbeInterval steps.
  const Outcome free = simulate(4, 64, law, Noise(10), 0.0, 4000);
  EXPECT_GE(free.draft_tokens, 4000 / SpecController::kProbeInterval * 9 / 10);
}

TEST(SpecController, AProbeGoesToTheSequenceItsProposerLagsLeast) {
  SpecConfig sc;
  sc.method = SpecMethod::ngram;
  sc.max_tokens = 4;
  const CostlyProposer draft(1e-4);
  SpecController c(sc, 512);
  RequestState req;
  req.params.max_tokens = 1000;
  std::vector<std::unique_ptr<Sequence>> seqs;
  const std::vector<Sequence*> running = decoding(seqs, req, 4, 100);
  for (size_t i = 0; i < 4; ++i) {
    running[i]->proposer_computed = i == 2 ? 98 : 40;  // the draft is nearly up to date on one
    running[i]->spec_seen = 50;                        // and never accepted anything
  }
  for (int i = 0; i < 64; ++i) c.observe_step(4, 1e-3, 400);
  for (int i = 0; i < 64; ++i) c.observe_step(5, 1.01e-3, 500);
  for (Sequence* s : running) c.observe_draft(*s, 4, 0, true);
  bool probed = false;
  for (uint64_t step = 1; step <= SpecController::kProbeInterval; ++step) {
    c.plan(running, 4, 4096, draft);
    if (!c.last_plan().probe) continue;
    probed = true;
    EXPECT_EQ(running[2]->spec_k, 1u);
    EXPECT_EQ(running[0]->spec_k + running[1]->spec_k + running[3]->spec_k, 0u);
    EXPECT_EQ(c.last_plan().probe_interval, 2 * SpecController::kProbeInterval);
  }
  EXPECT_TRUE(probed);
}

TEST(SpecController, ADraftPassServesEverySequenceSoKClimbsPastOne) {
  // A memory-bound target and a draft pass at 15% of its step, 95% acceptance, 4 sequences: a
  // second pass is worth it for all four together (2.85 tokens per sequence per step
  // against 1.95 at K = 1), not for any one alone. Raised one sequence at a time, K stopped at
  // 1, and from the prior rate (0.5) not even there: 3 draft tokens in 736 steps. The plan per
  // depth goes deeper.
  const CostLaw law{1e-3, 1e-5, 0};
  const CostlyProposer draft(1.5e-4);
  const Outcome o = simulate(4, 64, law, Noise(11), 0.95, 800, 64, 7, &draft);
  EXPECT_GE(o.steps_with_drafts, o.steps * 2 / 3);
  EXPECT_GE(o.draft_tokens, o.steps * 4 * 3);  // K >= 3 per sequence on average
  // At 30% acceptance the same passes do not pay: no more than one token per sequence.
  const Outcome poor = simulate(4, 64, law, Noise(11), 0.3, 800, 64, 7, &draft);
  EXPECT_LE(poor.draft_tokens, poor.steps * 4);
}

TEST(SpecController, RowsThatCostTheirShareGetNoDraftsEvenWithGoodAcceptance) {
  // At 0.8 acceptance a draft token is worth 0.8 / 16 = 5% more tokens, still below its 6%.
  const CostLaw law{1e-5, 1e-4, 0};
  const Outcome o = simulate(16, 100, law, Noise(4), 0.8, 1500);
  EXPECT_LE(o.steps_beyond_probe, o.steps / 100);
}

TEST(SpecController, NearlyFreeRowsGetDraftsAtOneSequence) {
  // Memory-bound: reading the weights dominates, a row adds 1%.
  const CostLaw law{1e-3, 1e-5, 0};
  const Outcome o = simulate(1, 64, law, Noise(5), 0.7, 800);
  EXPECT_GE(o.steps_with_drafts, o.steps * 9 / 10);
  EXPECT_GE(o.draft_tokens, o.steps * 3);  // several tokens per step, not a probe's one
}

TEST(SpecController, NearlyFreeRowsGetDraftsAtFourSequences) {
  const CostLaw law{1e-3, 1e-5, 1e-9};
  const Outcome o = simulate(4, 64, law, Noise(6), 0.7, 800);
  EXPECT_GE(o.steps_with_drafts, o.steps * 9 / 10);
}

TEST(SpecController, CheapCountsMeasuredLongAgoDoNotMakeDraftsFree) {
  // Early on, while contexts were short, steps of 17..24 tokens were measured cheap; since,
  // contexts grew and only plain steps of 16 ran, at twice the cost. An average per count kept
  // the old cheap figures and let drafts look free; the cost model must not.
  SpecConfig sc;
  sc.method = SpecMethod::ngram;
  sc.max_tokens = 8;
  NgramProposer ngram(1, 4);
  SpecController c(sc, 512);
  for (size_t n = 17; n <= 24; ++n) {
    c.observe_step(n, 1e-4 * static_cast<double>(n), 100.0 * static_cast<double>(n));
  }
  Noise noise(8);
  for (int i = 0; i < 300; ++i) c.observe_step(16, noise(2e-4 * 16), 400.0 * 16);
  RequestState req;
  req.params.max_tokens = 1000;
  std::vector<std::unique_ptr<Sequence>> seqs;
  const std::vector<Sequence*> running = decoding(seqs, req, 16, 400);
  for (Sequence* s : running) {
    s->spec_accepted = 8;
    s->spec_seen = 10;
  }
  c.plan(running, 16, 4096, ngram);  // step 1: not a probe step
  ASSERT_FALSE(c.last_plan().probe);
  size_t k = 0;
  for (Sequence* s : running) k += s->spec_k;
  EXPECT_EQ(k, 0u);
  EXPECT_GT(c.last_plan().base_cost, 0.0);
}

TEST(SpecCostModel, RecoversALineThroughNoisyStepsAndShrinksItsError) {
  StepCostModel m;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> count(12, 20);
  Noise noise(9);
  double se_early = 0;
  for (int i = 0; i < 256; ++i) {
    const auto n = static_cast<double>(count(rng));
    m.observe(n, 100 * n, noise(1e-3 + 2e-4 * n));
    if (i == 15) m.fit(16, 1600).extra(1, 100, &se_early);
  }
  const StepCostModel::Fit f = m.fit(16, 1600);
  ASSERT_TRUE(f.known);
  double se = 0;
  // Noise adds ~12% on average; the robust fit sits near the quiet line, below the mean.
  const double extra = f.extra(4, 400, &se);
  EXPECT_NEAR(extra, 4 * 2e-4, 0.3 * 4 * 2e-4);
  EXPECT_NEAR(f.base, 1e-3 + 2e-4 * 16, 0.2 * (1e-3 + 2e-4 * 16));
  EXPECT_GT(se, 0.0);
  EXPECT_LT(se, se_early);
}

TEST(SpecCostModel, AnUnmeasuredSlopeIsUncertain) {
  // Every step had 16 tokens: the slope is the prior's, and its error is the noise's size,
  // not the zero a flat table would suggest.
  StepCostModel m;
  Noise noise(10);
  for (int i = 0; i < 200; ++i) m.observe(16, 1600, noise(1e-3));
  const StepCostModel::Fit f = m.fit(16, 1600);
  ASSERT_TRUE(f.known);
  double se = 0;
  const double extra = f.extra(1, 100, &se);
  EXPECT_GT(extra, 0.0);
  EXPECT_GT(se, 0.01 * f.base);
}

TEST(SpecCostModel, FewStepsOrBadInputGiveNoFit) {
  StepCostModel m;
  EXPECT_FALSE(m.fit(1, 1).known);
  m.observe(1, 1, 1e-3);
  m.observe(1, 1, -1);
  m.observe(0, 1, 1e-3);
  m.observe(1, 1, std::nan(""));
  m.observe(1, 1, INFINITY);
  EXPECT_FALSE(m.fit(1, 1).known);
  EXPECT_FALSE(m.fit(0, 0).known);
  for (int i = 0; i < 10; ++i) m.observe(1, 1, 1e-3);
  const StepCostModel::Fit f = m.fit(1, 1);
  ASSERT_TRUE(f.known);
  EXPECT_NEAR(f.base, 1e-3, 1e-9);
}

}  // namespace
}  // namespace lift
