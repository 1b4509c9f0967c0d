// The engine's metrics as Prometheus text: names kept, the success counter labelled by finish
// reason, request and sequence gauges apart.
#include "server/prometheus.h"

#include <gtest/gtest.h>

#include <string>

namespace lift {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
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
  // Every sample line belongs to a metric announced by a TYPE line.
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

}  // namespace
}  // namespace lift
