// The engine's metrics as Prometheus text: names kept, the success counter labelled by finish
// reason, request and sequence gauges apart, speculative decoding's series labelled by proposer
// (only when it is on), and those counters read back as bench serve reads them.
#include "server/prometheus.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace lift {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

// Every sample line belongs to a metric announced by a TYPE line.
void expect_every_sample_typed(const std::string& t) {
  size_t pos = 0;
  while (pos < t.size()) {
    const size_t end = t.find('\n', pos);
    const std::string line = t.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string suf(suffix);
      if (name.size() > suf.size() &&
          name.compare(name.size() - suf.size(), suf.size(), suf) == 0 &&
          t.find("# TYPE " + name + " ") == std::string::npos) {
        name.resize(name.size() - suf.size());
      }
    }
    EXPECT_NE(t.find("# TYPE " + name + " "), std::string::npos) << line;
  }
}

TEST(Prometheus, SuccessCounterByFinishReasonAndRequestGauges) {
  EngineMetrics m;
  m.running = 2;
  m.running_seqs = 5;
  m.waiting = 1;
  m.waiting_seqs = 3;
  m.requests_finished = 7;
  m.requests_stop = 4;
  m.requests_length = 3;
  m.requests_aborted = 9;
  m.prefix_queries = 40;
  m.prefix_hits = 32;
  ServerCounters s;
  s.requests_aborted = 100;  // the server's own counter: never a success
  const std::string t = render_prometheus(m, s);
  EXPECT_TRUE(has_line(t, "# TYPE lift:request_success_total counter")) << t;
  EXPECT_TRUE(has_line(t, "lift:request_success_total{finished_reason=\"stop\"} 4")) << t;
  EXPECT_TRUE(has_line(t, "lift:request_success_total{finished_reason=\"length\"} 3")) << t;
  EXPECT_EQ(t.find("finished_reason=\"abort\""), std::string::npos);
  EXPECT_TRUE(has_line(t, "lift:num_requests_running 2")) << t;
  EXPECT_TRUE(has_line(t, "lift:num_requests_waiting 1")) << t;
  EXPECT_TRUE(has_line(t, "lift:num_sequences_running 5")) << t;
  EXPECT_TRUE(has_line(t, "lift:num_sequences_waiting 3")) << t;
  EXPECT_TRUE(has_line(t, "lift:prefix_cache_queries_total 40")) << t;
  EXPECT_TRUE(has_line(t, "lift:prefix_cache_hits_total 32")) << t;
  expect_every_sample_typed(t);
  // Speculation off: no spec_decode series at all.
  EXPECT_EQ(t.find("spec_decode"), std::string::npos) << t;
}

SpecDecodeMetrics filled_spec() {
  SpecDecodeMetrics s;
  s.proposer = "ngram";
  s.drafts = 10;
  s.draft_tokens = 40;
  s.accepted_tokens = 25;
  s.accepted_per_pos = {9, 7, 5, 4};
  for (double v : {4.0, 3.0, 3.0, 2.0, 0.0, 4.0, 3.0, 2.0, 2.0, 2.0}) s.accepted_length.observe(v);
  return s;
}

TEST(Prometheus, SpecDecodeSeriesByProposer) {
  EngineMetrics m;
  m.spec = filled_spec();
  const std::string t = render_prometheus(m, ServerCounters{});
  EXPECT_TRUE(has_line(t, "# TYPE lift:spec_decode_num_drafts_total counter")) << t;
  EXPECT_TRUE(has_line(t, "lift:spec_decode_num_drafts_total{proposer=\"ngram\"} 10")) << t;
  EXPECT_TRUE(has_line(t, "lift:spec_decode_num_draft_tokens_total{proposer=\"ngram\"} 40")) << t;
  EXPECT_TRUE(has_line(t, "lift:spec_decode_num_accepted_tokens_total{proposer=\"ngram\"} 25"))
      << t;
  EXPECT_TRUE(has_line(t, "# TYPE lift:spec_decode_num_accepted_tokens_per_pos counter")) << t;
  for (int i = 0; i < 4; ++i) {
    const std::string want =
        "lift:spec_decode_num_accepted_tokens_per_pos{proposer=\"ngram\","
        "position=\"" +
        std::to_string(i) + "\"} " +
        std::to_string(m.spec.accepted_per_pos[static_cast<size_t>(i)]);
    EXPECT_TRUE(has_line(t, want)) << want << "\n" << t;
  }
  // Cumulative buckets of accepted tokens per draft: 0 once, 2 four times, 3 three times, 4 twice.
  EXPECT_TRUE(has_line(t, "# TYPE lift:spec_decode_accepted_length histogram")) << t;
  for (const auto& [le, n] : std::vector<std::pair<std::string, int>>{
           {"0", 1}, {"1", 1}, {"2", 5}, {"3", 8}, {"4", 10}, {"16", 10}, {"+Inf", 10}}) {
    const std::string want = "lift:spec_decode_accepted_length_bucket{proposer=\"ngram\",le=\"" +
                             le + "\"} " + std::to_string(n);
    EXPECT_TRUE(has_line(t, want)) << want << "\n" << t;
  }
  EXPECT_TRUE(has_line(t, "lift:spec_decode_accepted_length_sum{proposer=\"ngram\"} 25")) << t;
  EXPECT_TRUE(has_line(t, "lift:spec_decode_accepted_length_count{proposer=\"ngram\"} 10")) << t;
  // The unlabelled histograms keep their plain form.
  EXPECT_TRUE(has_line(t, "lift:time_to_first_token_seconds_count 0")) << t;
  expect_every_sample_typed(t);

  // A proposer's name is a label value: quotes and backslashes escaped.
  m.spec.proposer = "my \"draft\"\\x";
  const std::string q = render_prometheus(m, ServerCounters{});
  EXPECT_TRUE(
      has_line(q, "lift:spec_decode_num_drafts_total{proposer=\"my \\\"draft\\\"\\\\x\"} 10"))
      << q;
}

TEST(Prometheus, SpecDecodeCountersReadBack) {
  EngineMetrics m;
  m.spec = filled_spec();
  const SpecDecodeMetrics r = parse_spec_decode(render_prometheus(m, ServerCounters{}));
  EXPECT_EQ(r.proposer, "ngram");
  EXPECT_EQ(r.drafts, 10u);
  EXPECT_EQ(r.draft_tokens, 40u);
  EXPECT_EQ(r.accepted_tokens, 25u);
  EXPECT_EQ(r.accepted_per_pos, m.spec.accepted_per_pos);
  // Off: nothing to read.
  EXPECT_TRUE(
      parse_spec_decode(render_prometheus(EngineMetrics{}, ServerCounters{})).proposer.empty());
  // vLLM's names and labels: any prefix, no proposer label, label sets summed, timestamps and
  // junk lines skipped.
  const SpecDecodeMetrics v = parse_spec_decode(
      "# HELP vllm:spec_decode_num_drafts_total x\n"
      "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 3.0\n"
      "vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} 4.0 1700000000\n"
      "vllm:spec_decode_num_draft_tokens_total{engine=\"0\"} 21\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 9\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos{engine=\"0\",position=\"1\"} 2\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos{engine=\"0\",position=\"x\"} 5\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} junk\n"
      "garbage line without value\n");
  EXPECT_EQ(v.proposer, "server");
  EXPECT_EQ(v.drafts, 7u);
  EXPECT_EQ(v.draft_tokens, 21u);
  EXPECT_EQ(v.accepted_tokens, 9u);
  EXPECT_EQ(v.accepted_per_pos, (std::vector<uint64_t>{0, 2}));
}

}  // namespace
}  // namespace lift
