#include "util/bench_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "util/error.h"

namespace lift::bench {
namespace {

TEST(BenchStats, ParsesBaseUrls) {
  BaseUrl u = parse_base_url("http://127.0.0.1:18123");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 18123);
  EXPECT_EQ(u.prefix, "");

  u = parse_base_url("http://localhost/");
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.prefix, "");

  u = parse_base_url("http://example.test:8000/proxy/llm/v1/");
  EXPECT_EQ(u.host, "example.test");
  EXPECT_EQ(u.port, 8000);
  EXPECT_EQ(u.prefix, "/proxy/llm");

  u = parse_base_url("http://[::1]:9000/v1");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 9000);
  EXPECT_EQ(u.prefix, "");

  for (const char* bad :
       {"https://127.0.0.1:8080", "127.0.0.1:8080", "http://", "http://:80", "http://h:0",
        "http://h:70000", "http://h:8x", "http://h/?q=1", "http://[::1", "http://u@h"}) {
    EXPECT_THROW(parse_base_url(bad), Error) << bad;
  }
}

TEST(BenchStats, SplitsServerSentEvents) {
  SseSplitter s;
  EXPECT_TRUE(s.feed("data: {\"a\"", 10).empty());
  const std::string rest = ":1}\n\n: keep-alive\n\ndata: x\r\n\r\ndata: [DONE]\n\ndata: tail";
  const auto ev = s.feed(rest.data(), rest.size());
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0], "{\"a\":1}");
  EXPECT_EQ(ev[1], "x");
  EXPECT_EQ(ev[2], "[DONE]");
  EXPECT_EQ(s.feed("\n\n", 2), std::vector<std::string>{"tail"});
}

TEST(BenchStats, PoissonArrivals) {
  const auto inf = poisson_arrivals(5, std::numeric_limits<double>::infinity(), 1);
  EXPECT_EQ(inf, std::vector<double>(5, 0.0));
  const auto a = poisson_arrivals(20000, 50.0, 7);
  EXPECT_EQ(a, poisson_arrivals(20000, 50.0, 7));  // seeded
  EXPECT_EQ(a[0], 0.0);
  for (size_t i = 1; i < a.size(); ++i) ASSERT_GE(a[i], a[i - 1]);
  // Mean gap 1/rate = 20 ms, within a few percent over 20000 arrivals.
  EXPECT_NEAR(a.back() / static_cast<double>(a.size() - 1), 0.02, 0.001);
}

TEST(BenchStats, PercentilesInterpolateLikeNumpy) {
  EXPECT_EQ(percentile({}, 50), 0.0);
  EXPECT_EQ(percentile({3}, 99), 3.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 99), 4.96);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 100), 5.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 0), 1.0);
}

TEST(BenchStats, ComputesServingMetrics) {
  std::vector<RequestResult> rs(3);
  rs[0] = {true, "", 0.1, 1.0, {0.3, 0.3, 0.3}, 32, 4};  // TPOT (1.0-0.1)/3 = 0.3
  rs[1] = {true, "", 0.2, 0.5, {0.1, 0.2}, 32, 4};       // TPOT 0.1
  rs[2] = {false, "HTTP 500: boom", 0, 0.05, {}, 0, 0};
  const LevelMetrics m = compute_metrics(rs, 2.0);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.failures.at("HTTP 500: boom"), 1);
  EXPECT_EQ(m.total_input, 64);
  EXPECT_EQ(m.total_output, 8);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 36.0);
  EXPECT_NEAR(m.ttft.mean, 0.15, 1e-12);
  EXPECT_NEAR(m.tpot.mean, 0.2, 1e-12);
  EXPECT_NEAR(m.tpot.median, 0.2, 1e-12);
  EXPECT_NEAR(m.itl.median, 0.3, 1e-12);
  EXPECT_NEAR(m.itl.mean, 1.2 / 5, 1e-12);
  EXPECT_NEAR(m.e2el.p99, 0.5 + 0.99 * 0.5, 1e-12);

  const auto j = metrics_json(m);
  EXPECT_NEAR(j["mean_ttft_ms"].get<double>(), 150.0, 1e-9);
  EXPECT_EQ(j["completed"], 2);
  EXPECT_EQ(j["failures"]["HTTP 500: boom"], 1);
}

TEST(BenchStats, DrawsAnSvgChart) {
  const std::vector<ChartPoint> pts{
      {"c=1", 100, 10, 12, 9, 9.5}, {"c=2", 180, 11, 15, 10, 11}, {"c=4", 300, 14, 30, 12, 14}};
  const std::string svg = latency_chart_svg(pts, "model <x> & y");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("model &lt;x&gt; &amp; y"), std::string::npos);
  EXPECT_NE(svg.find("Output throughput (tok/s)"), std::string::npos);
  EXPECT_NE(svg.find("TTFT (ms)"), std::string::npos);
  EXPECT_NE(svg.find("TPOT (ms)"), std::string::npos);
  EXPECT_NE(svg.find(">c=4</text>"), std::string::npos);
  // Empty and degenerate inputs still give a document.
  EXPECT_NE(latency_chart_svg({}, "none").find("</svg>"), std::string::npos);
  EXPECT_NE(latency_chart_svg({{"c=1", 0, 0, 0, 0, 0}}, "zero").find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace lift::bench
