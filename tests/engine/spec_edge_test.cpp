// Speculative decoding at its edges, end to end: seeded sampled requests with n-gram drafts give
// bitwise plain decoding's tokens, text and logprobs (the verifier couples a point-mass draft to
// the plain draw, so the controller's timing-dependent K cannot change them); a request that ends
// inside an accepted draft (stop string, stop id, EOS, min_tokens) ends where plain decoding
// ends; parallel samples, spec_tokens 0 and a model whose every layer slides. Every test ends
// with every KV block back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <tuple>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "spec_test_util.h"

namespace lift {
namespace {

using test::drain;
using test::expect_all_blocks_back;
using test::expect_all_same;
using test::expect_same;
using test::Job;
using test::Result;
using test::run;
using test::Sample;

test::LoadedModel& stories() {
  static test::LoadedModel f("stories260K/stories260K.gguf");
  return f;
}

EngineConfig config(size_t kv_blocks, SpecMethod method, size_t k, bool adaptive) {
  EngineConfig c = test::small_engine_config(kv_blocks, 32);
  c.spec.method = method;
  c.spec.max_tokens = k;
  c.spec.adaptive = adaptive;
  return c;
}

EngineConfig plain_config(size_t kv_blocks = 256) {
  return config(kv_blocks, SpecMethod::off, 1, false);
}

// Story-like prompts that repeat a sentence (n-gram lookup finds what followed it) and prompts
// of repeated random motifs; sampled with temperature 0.8 and top-p, each with its own seed.
std::vector<Job> sampled_jobs(size_t n, uint32_t seed) {
  const std::vector<int32_t> story = stories().tok.encode(
      "Once upon a time, there was a little girl named Lily. She liked to "
      "play in the park. Once upon a time, there was a little",
      true, false);
  std::mt19937 rng(seed);
  std::vector<Job> out(n);
  for (size_t i = 0; i < n; ++i) {
    Job& j = out[i];
    if (i % 2 == 0) {
      j.prompt = story;
      j.prompt.resize(story.size() - i % 5);
    } else {
      j.prompt = {1};
      const int period = std::uniform_int_distribution<int>(2, 6)(rng);
      std::vector<int32_t> motif;
      for (int k = 0; k < period; ++k)
        motif.push_back(std::uniform_int_distribution<int>(3, 511)(rng));
      const int len = std::uniform_int_distribution<int>(8, 40)(rng);
      for (int k = 0; k < len; ++k) j.prompt.push_back(motif[static_cast<size_t>(k % period)]);
    }
    RequestParams& p = j.params;
    p.max_tokens = std::uniform_int_distribution<int>(20, 60)(rng);
    p.ignore_eos = i % 4 != 0;
    p.sampling.temperature = 0.8f;
    p.sampling.top_p = i % 3 == 0 ? 0.9f : 1.0f;
    if (i % 5 == 2) p.sampling.repetition_penalty = 1.2f;  // rows that depend on the history
    p.sampling.seed = 1000 + i;
    p.logprobs = true;
    p.sampling.n_logprobs = i % 2 == 0 ? 5 : 0;
  }
  return out;
}

TEST(SpecEdge, SampledNgramIsBitwisePlainForEveryKAloneBatchedAndPreempted) {
  const auto js = sampled_jobs(24, 7);
  const auto plain = run(stories(), plain_config(), js, true);
  for (bool adaptive : {false, true}) {
    for (size_t k : {3, 8}) {
      const std::string what = "adaptive " + std::to_string(adaptive) + " K " + std::to_string(k);
      EngineMetrics m;
      expect_all_same(run(stories(), config(256, SpecMethod::ngram, k, adaptive), js, true, &m),
                      plain, what + " batched");
      EXPECT_GT(m.spec.draft_tokens, 0u) << what;
      EXPECT_GT(m.spec.accepted_tokens, 0u) << what;
      // 30 blocks of 16 tokens hold a few of these at once: sequences are preempted mid-draft.
      expect_all_same(run(stories(), config(30, SpecMethod::ngram, k, adaptive), js, true, &m),
                      plain, what + " preempted");
      EXPECT_GT(m.preemptions, 0u) << what;
    }
  }
  const std::vector<Job> few(js.begin(), js.begin() + 6);
  const std::vector<Result> few_plain(plain.begin(), plain.begin() + 6);
  expect_all_same(run(stories(), config(256, SpecMethod::ngram, 8, true), few, false), few_plain,
                  "alone");
}

// Replays known runs: for a sequence of (prompt, seed, sample) it proposes the tokens that run
// chose next, then a few it never chose, so every draft token of the run is accepted and a
// request's last token can stand inside a draft with more after it. With wrong_every m > 0, the
// guess at every output position p with p % m == m - 1 is wrong instead.
class ReplayProposer final : public Proposer {
 public:
  using Key = std::tuple<std::vector<int32_t>, uint64_t, int>;
  explicit ReplayProposer(size_t wrong_every = 0) : wrong_every_(wrong_every) {}
  void add(const Job& j, const Result& r) {
    for (size_t s = 0; s < r.size(); ++s)
      runs_[{j.prompt, j.params.sampling.seed, static_cast<int>(s)}] = r[s].full;
  }
  std::string_view name() const override { return "replay"; }
  void propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) override {
    for (size_t i = 0; i < reqs.size(); ++i) {
      const Sequence& s = *reqs[i].seq;
      const std::vector<int32_t> prompt(s.tokens.begin(),
                                        s.tokens.begin() + static_cast<std::ptrdiff_t>(s.n_prompt));
      const std::vector<int32_t>& run = runs_.at({prompt, s.req->params.sampling.seed, s.index});
      for (size_t p = s.n_output(); drafts[i].tokens.size() < reqs[i].max_tokens; ++p) {
        const int32_t right = p < run.size() ? run[p] : -1;
        const bool wrong = right < 0 || (wrong_every_ > 0 && p % wrong_every_ == wrong_every_ - 1);
        drafts[i].tokens.push_back(wrong ? (right == 3 ? 4 : 3) : right);
      }
    }
  }

 private:
  size_t wrong_every_;
  std::map<Key, std::vector<int32_t>> runs_;
};

// A plain run of each job (returned), then each job alone with its replay as the draft (K 8,
// fixed): equal. `inside` counts the requests whose last token was a draft token rather than
// the target's own token after the drafts.
std::vector<Result> expect_replay_equals_plain(const std::vector<Job>& js, size_t* inside) {
  const auto plain = run(stories(), plain_config(), js, false);
  *inside = 0;
  for (size_t i = 0; i < js.size(); ++i) {
    // A replay per job: jobs may share prompt and seed and differ in how they end.
    auto replay = std::make_shared<ReplayProposer>();
    replay->add(js[i], plain[i]);
    EngineConfig c = config(256, SpecMethod::custom, 8, false);
    c.spec.proposer = replay;
    EngineMetrics m;
    const std::string what = "replay request " + std::to_string(i);
    expect_same(run(stories(), c, {js[i]}, false, &m).at(0), plain[i], what);
    // One prefill step (the prompt fits a chunk), then steps with a draft and plain steps
    // (where max_tokens leaves no room for one). Every draft token of the run is accepted, so
    // each step adds its accepted drafts and the target's own token, except a last step that
    // ended on a draft token.
    const uint64_t plain_steps = m.steps - 1 - m.spec.drafts;
    const uint64_t whole = 1 + m.spec.accepted_tokens + m.spec.drafts + plain_steps;
    const auto produced = static_cast<uint64_t>(plain[i][0].completion_tokens);
    EXPECT_TRUE(produced == whole || produced + 1 == whole)
        << what << ": " << produced << " tokens, " << m.spec.accepted_tokens << " accepted in "
        << m.spec.drafts << " drafts, " << m.steps << " steps";
    *inside += produced + 1 == whole;
  }
  return plain;
}

TEST(SpecEdge, RequestsEndingInsideAnAcceptedDraftEndWherePlainDecodingEnds) {
  // Free runs, one greedy and two sampled, give the stop strings: texts these runs produce.
  const std::vector<int32_t> prompt =
      stories().tok.encode("Once upon a time, there was a", true, false);
  RequestParams base;
  base.max_tokens = 60;
  base.ignore_eos = true;
  base.logprobs = true;
  base.sampling.n_logprobs = 5;
  std::vector<Job> free_runs;
  for (int i = 0; i < 3; ++i) {
    Job j{prompt, base};
    j.params.sampling.temperature = i == 0 ? 0.0f : 0.8f;
    j.params.sampling.seed = 40 + static_cast<uint64_t>(i);
    free_runs.push_back(j);
  }
  const auto texts = run(stories(), plain_config(), free_runs, true);
  std::vector<Job> js;
  for (size_t i = 0; i < free_runs.size(); ++i) {
    const std::string& t = texts[i][0].text;
    ASSERT_GT(t.size(), 120u);
    for (size_t at : {11, 23, 40, 57, 75, 96}) {  // stop strings spread over the output
      Job j = free_runs[i];
      j.params.stop = {t.substr(at, 4)};
      js.push_back(j);
    }
    Job eos = free_runs[i];  // EOS inside the draft: its logit biased up after min_tokens
    eos.params.ignore_eos = false;
    eos.params.min_tokens = 13;
    eos.params.sampling.logit_bias = {{stories().tok.vocab().eos_id(), 1000.0f}};
    js.push_back(eos);
    Job stop_id = eos;  // the same with a stop id
    stop_id.params.ignore_eos = true;
    stop_id.params.min_tokens = 0;  // the mask would change the run before the stop id
    stop_id.params.stop_token_ids = {texts[i][0].full.at(20)};
    stop_id.params.sampling.logit_bias.clear();
    js.push_back(stop_id);
  }
  size_t inside = 0, expected_inside = 0;
  for (const Result& r : expect_replay_equals_plain(js, &inside)) {
    EXPECT_EQ(r[0].finish, FinishReason::stop);
    // Output 0 comes from the prefill; each step then verifies 8 drafts and adds the target's
    // own token at outputs 9, 18, ...: every other last output is a draft token.
    expected_inside += (r[0].completion_tokens - 1) % 9 != 0;
  }
  EXPECT_EQ(inside, expected_inside);
  EXPECT_GT(inside, js.size() / 2) << "too few requests ended inside a draft";
}

TEST(SpecEdge, MaxTokensAndMinTokensWithEosProposedEarly) {
  // Each max_tokens from 1 to 19 against K 8: the cap on drafts leaves room for the target's
  // own token, so the request ends exactly at max_tokens.
  std::vector<Job> js;
  const std::vector<int32_t> prompt =
      stories().tok.encode("Lily and Ben went to the park.", true, false);
  for (int n = 1; n < 20; ++n) {
    Job j{prompt, {}};
    j.params.max_tokens = n;
    j.params.ignore_eos = true;
    j.params.sampling.temperature = n % 2 == 0 ? 0.0f : 0.8f;
    j.params.sampling.seed = static_cast<uint64_t>(n);
    j.params.logprobs = true;
    js.push_back(j);
  }
  size_t inside = 0;
  const auto plain_lengths = expect_replay_equals_plain(js, &inside);
  EXPECT_EQ(inside, 0u);
  for (size_t i = 0; i < js.size(); ++i) {
    EXPECT_EQ(plain_lengths[i][0].finish, FinishReason::length);
    EXPECT_EQ(plain_lengths[i][0].completion_tokens, js[i].params.max_tokens);
  }
  expect_all_same(run(stories(), config(256, SpecMethod::ngram, 8, false), js, true), plain_lengths,
                  "max_tokens under n-gram drafts");

  // A proposer that guesses EOS at every position: before min_tokens the target's rows mask
  // EOS, so every guess fails; from min_tokens on EOS is likely (biased) and accepted.
  class EosProposer final : public Proposer {
   public:
    explicit EosProposer(int32_t eos) : eos_(eos) {}
    std::string_view name() const override { return "eos"; }
    void propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) override {
      for (size_t i = 0; i < reqs.size(); ++i) drafts[i].tokens.assign(reqs[i].max_tokens, eos_);
    }

   private:
    int32_t eos_;
  };
  const int32_t eos = stories().tok.vocab().eos_id();
  std::vector<Job> mins;
  for (int i = 0; i < 8; ++i) {
    Job j{prompt, {}};
    j.params.max_tokens = 40;
    j.params.min_tokens = 3 + 2 * i;
    j.params.sampling.temperature = i % 2 == 0 ? 0.0f : 0.8f;
    j.params.sampling.seed = 70 + static_cast<uint64_t>(i);
    j.params.sampling.logit_bias = {{eos, 40.0f}};
    j.params.logprobs = true;
    j.params.sampling.n_logprobs = 2;
    mins.push_back(j);
  }
  const auto plain = run(stories(), plain_config(), mins, true);
  for (size_t i = 0; i < mins.size(); ++i) {
    EXPECT_EQ(plain[i][0].finish, FinishReason::stop) << i;
    EXPECT_GE(plain[i][0].completion_tokens, mins[i].params.min_tokens + 1) << i;
  }
  EngineConfig c = config(256, SpecMethod::custom, 4, false);
  c.spec.proposer = std::make_shared<EosProposer>(eos);
  EngineMetrics m;
  expect_all_same(run(stories(), c, mins, true, &m), plain, "EOS proposed before min_tokens");
  EXPECT_GT(m.spec.draft_tokens, m.spec.accepted_tokens);
  EXPECT_GT(m.spec.accepted_tokens, 0u);
}

TEST(SpecEdge, ParallelSamplesEachEqualPlain) {
  auto js = sampled_jobs(6, 21);
  for (size_t i = 0; i < js.size(); ++i) {
    js[i].params.n = 3;
    js[i].params.max_tokens = 40;
  }
  const auto plain = run(stories(), plain_config(), js, true);
  for (bool adaptive : {false, true}) {
    EngineMetrics m;
    expect_all_same(run(stories(), config(256, SpecMethod::ngram, 6, adaptive), js, true, &m),
                    plain, "n = 3, adaptive " + std::to_string(adaptive));
    EXPECT_GT(m.spec.accepted_tokens, 0u);
  }
  // The samples differ from each other (each has its own random stream).
  EXPECT_NE(plain[0][0].tokens, plain[0][1].tokens);
}

TEST(SpecEdge, SpecTokensZeroDraftsNothing) {
  auto js = sampled_jobs(12, 5);
  for (size_t i = 0; i < js.size(); ++i) {
    js[i].params.spec_tokens = 0;
    if (i % 3 == 0) js[i].params.sampling.temperature = 0;
  }
  const auto plain = run(stories(), plain_config(), js, true);
  for (bool adaptive : {false, true}) {
    EngineMetrics m;
    expect_all_same(run(stories(), config(256, SpecMethod::ngram, 8, adaptive), js, true, &m),
                    plain, "spec_tokens 0");
    EXPECT_EQ(m.spec.proposer, "ngram");
    EXPECT_EQ(m.spec.drafts, 0u);
    EXPECT_EQ(m.spec.draft_tokens, 0u);
  }
  // One request of them allowed: only it drafts.
  js[1].params.spec_tokens = 4;
  EngineMetrics m;
  expect_all_same(run(stories(), config(256, SpecMethod::ngram, 8, false), js, true, &m), plain,
                  "one request speculating");
  EXPECT_GT(m.spec.draft_tokens, 0u);
  EXPECT_LE(m.spec.draft_tokens, 4u * static_cast<uint64_t>(js[1].params.max_tokens));
}

// On a model whose every layer slides, rollback truncates a table whose first blocks were given
// back. Random weights never repeat themselves, so n-gram lookup finds little to propose here;
// a replay that is wrong at every fourth position drafts, accepts and rejects throughout.
TEST(SpecEdge, SlidingWindowModelWithSpeculationEqualsPlainAndReleasesBlocks) {
  static test::LoadedModel phi3("archs/archs-phi3.gguf");
  ASSERT_EQ(phi3.model->config().kv_window(), 20);
  std::vector<Job> js;
  for (int i = 0; i < 4; ++i) {
    Job j;
    j.prompt = {1};
    for (int t = 0; t < 30 + 7 * i; ++t) j.prompt.push_back(200 + (t % (3 + i)) * 17);
    j.params.max_tokens = 64;
    j.params.ignore_eos = true;
    j.params.sampling.temperature = i % 2 == 0 ? 0.0f : 0.8f;
    j.params.sampling.seed = 5 + static_cast<uint64_t>(i);
    j.params.logprobs = true;
    j.params.sampling.n_logprobs = 3;
    if (i == 3) j.params.n = 2;
    js.push_back(j);
  }
  const auto plain = run(phi3, test::small_engine_config(64, 16), js, true);
  auto replay = std::make_shared<ReplayProposer>(4);
  for (size_t i = 0; i < js.size(); ++i) replay->add(js[i], plain[i]);
  auto spec = [&](SpecMethod method, size_t kv_blocks) {
    EngineConfig c = test::small_engine_config(kv_blocks, 16);
    c.spec.method = method;
    c.spec.max_tokens = 8;
    c.spec.adaptive = false;
    if (method == SpecMethod::custom) c.spec.proposer = replay;
    return c;
  };
  {
    // Alone, a sequence holds its window's blocks and no more, drafts included.
    Engine e(*phi3.model, phi3.tok, spec(SpecMethod::custom, 64));
    auto s = e.add_request(js[1].prompt, js[1].params);
    size_t most = 0;
    while (e.step()) most = std::max(most, e.blocks().n_used());
    EXPECT_LE(most, e.plan().seq_blocks);
    expect_same(drain(*s.stream, 1), plain[1], "alone");
    const EngineMetrics m = e.metrics();
    EXPECT_GT(m.spec.accepted_tokens, 30u);
    EXPECT_GT(m.spec.draft_tokens, m.spec.accepted_tokens + 10);
    expect_all_blocks_back(e);
  }
  // 12 blocks: three windows; the four requests (five samples) take turns, preempted.
  for (SpecMethod method : {SpecMethod::custom, SpecMethod::ngram}) {
    EngineMetrics m;
    expect_all_same(run(phi3, spec(method, 12), js, true, &m), plain,
                    std::string("sliding window, ") + spec_method_name(method));
    EXPECT_GT(m.preemptions, 0u);
    if (method == SpecMethod::custom) {
      EXPECT_GT(m.spec.accepted_tokens, 100u);
    }
  }
}

}  // namespace
}  // namespace lift
