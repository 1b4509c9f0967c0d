// Pure helpers for `lift bench serve`: base-URL parsing, SSE splitting, Poisson arrival
// times, the serving metrics (vLLM's definitions of TTFT, TPOT, ITL and end-to-end latency)
// and a hand-written SVG chart of latency versus throughput. Kept in the library, away
// from the network code, so that they can be unit tested.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lift::bench {

// http://host[:port][/prefix]; the port defaults to 80, a trailing "/" or "/v1" is dropped
// (endpoints such as /v1/completions are appended to the prefix). Throws lift::Error for
// anything else, https included.
struct BaseUrl {
  std::string host;
  int port = 80;
  std::string prefix;  // "" or "/something", never ending in '/'
};
BaseUrl parse_base_url(const std::string& url);

// Splits a server-sent-event byte stream into the payloads of its `data:` lines, one per
// event. Comments (": keep-alive") and other fields are skipped; CRLF is accepted.
class SseSplitter {
 public:
  // Appends bytes; returns the data payloads of the events completed by them.
  std::vector<std::string> feed(const char* data, size_t len);

 private:
  std::string buf_;
};

// Arrival offsets in seconds for n requests: the first at 0, then exponential gaps with
// mean 1/rate (a Poisson process). rate <= 0 or infinite puts every arrival at 0.
std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed);

// The p-th percentile (p in [0, 100]) with linear interpolation between closest ranks, as
// numpy's default; 0 for an empty sample.
double percentile(std::vector<double> v, double p);

struct Summary {
  double mean = 0, median = 0, p99 = 0, std = 0;  // seconds
};
Summary summarize(const std::vector<double>& v);

// What one request measured, in seconds.
struct RequestResult {
  bool ok = false;
  std::string error;        // why it failed; empty when ok
  double ttft = 0;          // to the first content chunk
  double e2e = 0;           // to the end of the response
  std::vector<double> itl;  // gaps between successive content chunks
  int prompt_tokens = 0;
  int output_tokens = 0;  // usage.completion_tokens
};

struct LevelMetrics {
  int completed = 0, failed = 0;
  double duration = 0;  // seconds, first send to last response
  long total_input = 0, total_output = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Summary ttft, tpot, itl, e2el;
  std::map<std::string, int> failures;  // reason -> count
};

// Aggregates the completed requests (failed ones only counted, with their reasons).
// TPOT per request is (e2e - ttft) / (output_tokens - 1), for requests of 2+ tokens; ITL is
// pooled over all gaps of all completed requests.
LevelMetrics compute_metrics(const std::vector<RequestResult>& results, double duration);

// Summary numbers, latencies in milliseconds (keys as vLLM's result file: mean_ttft_ms, ...).
nlohmann::json metrics_json(const LevelMetrics& m);

// One point of the chart: a run at some load level.
struct ChartPoint {
  std::string label;             // e.g. "c=4"
  double output_throughput = 0;  // tok/s
  double ttft_median_ms = 0, ttft_p99_ms = 0, tpot_median_ms = 0, tpot_p99_ms = 0;
};

// A standalone SVG document: two panels (TTFT, TPOT) of median and p99 latency versus
// output throughput, with labelled axes and each point labelled.
std::string latency_chart_svg(const std::vector<ChartPoint>& points, const std::string& title);

}  // namespace lift::bench
