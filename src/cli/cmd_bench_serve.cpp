// lift bench serve: a load generator for a running OpenAI-compatible server (lift's or
// another's). Streams /v1/completions at a fixed concurrency or with Poisson arrivals and
// reports, as `vllm bench serve` does, request and token throughput and the mean, median
// and p99 of TTFT, TPOT, ITL and end-to-end latency; a sweep over concurrencies also draws
// a latency-versus-throughput chart. Where the server's /metrics has speculative decoding's
// counters (lift's or vLLM's), each level reports its drafts, acceptance rate and mean accepted
// length; --spec-tokens sends lift's per-request spec_tokens (0: speculation off), so one server
// started with --spec compares both.
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/joining_thread.h"
#include "cli/spec_report.h"
#include "cli/timing.h"
#include "server/prometheus.h"
#include "util/bench_stats.h"
#include "util/error.h"

namespace lift::cli {

namespace {

using bench::RequestResult;
using nlohmann::json;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct ServeBenchOptions {
  std::string base_url;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<int> concurrency{1, 4, 8};
  std::string request_rate;  // empty: closed loop at each concurrency
  int max_concurrency = 0;   // with --request-rate; 0: no limit
  std::vector<int> sweep;
  int num_prompts = 32;
  int input_len = 128;
  int output_len = 64;
  int vocab = 512;                // prompt token ids are drawn from [3, vocab)
  int spec_tokens = -1;           // sent as spec_tokens when >= 0
  std::string json_schema;        // --json-schema: sent as response_format
  nlohmann::ordered_json schema;  // its contents, keys in the file's order
  std::string dataset;
  std::string model;
  std::string api_key;
  uint64_t seed = 0;
  std::string result_file;
  std::string chart = "bench-serve.svg";
  bool chart_given = false;
  bool progress = false, no_progress = false;
};

struct Target {
  std::string host;
  int port = 0;
  std::string prefix;
  httplib::Headers headers;
};

// One load level: `concurrency` requests in flight at most (0: no limit), arriving at
// `rate` per second (infinite: all at once).
struct Level {
  std::string label;
  int concurrency = 0;
  double rate = kInf;
};

std::unique_ptr<httplib::Client> make_client(const Target& t) {
  auto c = std::make_unique<httplib::Client>(t.host, t.port);
  c->set_connection_timeout(10, 0);
  c->set_read_timeout(600, 0);
  c->set_write_timeout(60, 0);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // or Nagle holds the body behind the headers for a delayed ACK
  return c;
}

std::string clip(std::string s, size_t n = 120) {
  for (char& ch : s) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

// The message of an OpenAI-style error body, or the body itself.
std::string error_message(const std::string& body) {
  const auto j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      return e["message"].get<std::string>();
    }
    if (e.is_string()) return e.get<std::string>();
  }
  return body;
}

// Sends one streamed completion and times its chunks. `expect` is the number of tokens
// usage.completion_tokens must report.
RequestResult send_one(httplib::Client& cli, const Target& t, const std::string& body, int expect) {
  RequestResult r;
  bench::SseSplitter sse;
  int status = 0;
  std::string error_body, stream_error;
  int usage_completion = -1, usage_prompt = 0;
  bool first = true;

  httplib::Request req;
  req.method = "POST";
  req.path = t.prefix + "/v1/completions";
  req.headers = t.headers;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.body = body;
  const auto start = Clock::now();
  auto last = start;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (status != 200) {
      if (error_body.size() < 4096) error_body.append(data, std::min<size_t>(len, 4096));
      return true;
    }
    const auto now = Clock::now();
    for (const std::string& payload : sse.feed(data, len)) {
      if (payload == "[DONE]") continue;
      const auto j = json::parse(payload, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        if (stream_error.empty()) stream_error = "unparseable stream chunk: " + clip(payload, 60);
        continue;
      }
      if (j.contains("error")) {
        if (stream_error.empty()) stream_error = "error event: " + clip(error_message(payload));
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        const json& u = j["usage"];
        if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
          usage_completion = u["completion_tokens"].get<int>();
        if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
          usage_prompt = u["prompt_tokens"].get<int>();
      }
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
      const json& c = j["choices"][0];
      if (!c.is_object() || !c.contains("text") || !c["text"].is_string() ||
          c["text"].get_ref<const std::string&>().empty()) {
        continue;
      }
      if (first) {
        r.ttft = secs(now - start);
        first = false;
      } else {
        r.itl.push_back(secs(now - last));
      }
      last = now;
    }
    return true;
  };
  const auto res = cli.send(req);
  r.e2e = secs(Clock::now() - start);
  r.prompt_tokens = usage_prompt;
  r.output_tokens = std::max(usage_completion, 0);
  if (!res) {
    r.error = "transport error: " + httplib::to_string(res.error());
  } else if (status != 200) {
    r.error = "HTTP " + std::to_string(status) + ": " + clip(error_message(error_body));
  } else if (!stream_error.empty()) {
    r.error = stream_error;
  } else if (usage_completion < 0) {
    r.error = "no usage.completion_tokens in the stream (stream_options.include_usage)";
  } else if (usage_completion != expect) {
    r.error =
        "usage.completion_tokens != output-len (got " + std::to_string(usage_completion) + ")";
  } else if (first) {
    r.error = "no content chunk in the stream";
  } else {
    r.ok = true;
  }
  return r;
}

// The server's speculative-decoding counters so far; empty (no proposer) when /metrics is
// missing or has none.
SpecDecodeMetrics scrape_spec(const Target& t) {
  auto cli = make_client(t);
  auto res = cli->Get(t.prefix + "/metrics", t.headers);
  if (!res || res->status != 200) return {};
  return parse_spec_decode(res->body);
}

// The first model the server lists, or "" if it lists none.
std::string discover_model(const Target& t) {
  auto cli = make_client(t);
  auto res = cli->Get(t.prefix + "/v1/models", t.headers);
  if (!res || res->status != 200) return "";
  const auto j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty())
    return "";
  const json& m = j["data"][0];
  return m.contains("id") && m["id"].is_string() ? m["id"].get<std::string>() : "";
}

std::vector<std::string> read_dataset(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open dataset '" + path + "'");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.empty()) throw Error("dataset '" + path + "' has no prompts (one per line)");
  return lines;
}

// Request bodies for one level: random token ids (a BOS, then ids from [3, vocab)) or the
// dataset's lines in turn, each asking for exactly output-len tokens.
std::vector<std::string> make_bodies(const ServeBenchOptions& o, const std::string& model,
                                     const std::vector<std::string>& dataset, size_t first, int n,
                                     std::mt19937_64& rng) {
  std::vector<std::string> bodies;
  for (int i = 0; i < n; ++i) {
    json prompt;
    if (!dataset.empty()) {
      prompt = dataset[(first + static_cast<size_t>(i)) % dataset.size()];
    } else {
      std::vector<int> ids{1};
      while (ids.size() < static_cast<size_t>(o.input_len)) {
        ids.push_back(3 + static_cast<int>(rng() % static_cast<uint64_t>(o.vocab - 3)));
      }
      prompt = ids;
    }
    const json body = {{"model", model},
                       {"prompt", prompt},
                       {"max_tokens", o.output_len},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    nlohmann::ordered_json b = body;  // ordered: the schema's properties keep their order
    if (o.spec_tokens >= 0) b["spec_tokens"] = o.spec_tokens;
    if (!o.json_schema.empty()) {
      b["response_format"] = {{"type", "json_schema"},
                              {"json_schema", {{"name", "bench"}, {"schema", o.schema}}}};
    }
    bodies.push_back(b.dump());
  }
  return bodies;
}

void draw_progress(const std::string& label, int done, int failed, int total, double elapsed,
                   bool final) {
  constexpr int kWidth = 30;
  const int fill = total > 0 ? done * kWidth / total : kWidth;
  std::string bar(static_cast<size_t>(fill), '#');
  bar.append(static_cast<size_t>(kWidth - fill), '.');
  std::fprintf(stderr, "\r%-14s [%s] %d/%d  failed %d  %.1fs%s", label.c_str(), bar.c_str(), done,
               total, failed, elapsed, final ? "\n" : "");
  std::fflush(stderr);
}

struct LevelRun {
  std::vector<RequestResult> results;
  double duration = 0;
};

LevelRun run_level(const Target& t, const Level& level, const std::vector<std::string>& bodies,
                   int expect, uint64_t seed, bool progress) {
  const int n = static_cast<int>(bodies.size());
  const std::vector<double> arrivals = bench::poisson_arrivals(n, level.rate, seed);
  LevelRun run;
  run.results.resize(bodies.size());
  std::atomic<int> next{0}, done{0}, failed{0};
  std::atomic<bool> all_done{false};
  // Requests go out in order, each to the first free worker, once it has arrived: the same
  // schedule as a semaphore of `concurrency` slots in front of the arrival process. A failed
  // request (whatever it throws) is recorded as failed; no exception leaves a worker.
  const int workers = level.concurrency > 0 ? std::min(level.concurrency, n) : n;
  const auto t0 = Clock::now();
  std::unique_ptr<JoiningThread> bar;
  if (progress) {
    bar = std::make_unique<JoiningThread>([&] {
      while (!all_done.load()) {
        draw_progress(level.label, done.load(), failed.load(), n, secs(Clock::now() - t0), false);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  {
    // Declared after `bar`, so on any exit the workers are joined, then the bar is told to stop
    // before it is joined.
    struct StopBar {
      std::atomic<bool>& flag;
      ~StopBar() { flag = true; }
    } stop_bar{all_done};
    std::vector<std::unique_ptr<JoiningThread>> pool;
    for (int w = 0; w < workers; ++w) {
      pool.push_back(std::make_unique<JoiningThread>([&] {
        auto cli = make_client(t);
        for (int i; (i = next.fetch_add(1)) < n;) {
          const auto idx = static_cast<size_t>(i);
          std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(arrivals[idx])));
          try {
            run.results[idx] = send_one(*cli, t, bodies[idx], expect);
          } catch (const std::exception& e) {
            run.results[idx] = RequestResult{};
            run.results[idx].error = std::string("client error: ") + e.what();
          }
          if (!run.results[idx].ok) failed.fetch_add(1);
          done.fetch_add(1);
        }
      }));
    }
    for (auto& w : pool) w->join();
  }
  run.duration = secs(Clock::now() - t0);
  if (bar) {
    bar->join();
    draw_progress(level.label, done.load(), failed.load(), n, run.duration, true);
  }
  return run;
}

std::string rate_text(double rate) {
  if (std::isinf(rate)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%g", rate);
  return b;
}

void print_level(const Level& level, const bench::LevelMetrics& m, const SpecDecodeMetrics& spec) {
  const auto line = [](const char* name, double v) { std::printf("%-40s%12.2f\n", name, v); };
  const auto count = [](const char* name, long v) { std::printf("%-40s%12ld\n", name, v); };
  const auto section = [](const char* title) {
    std::printf("%s\n", ("----- " + std::string(title) + " " +
                         std::string(45 - std::min<size_t>(45, std::string(title).size()), '-'))
                            .c_str());
  };
  std::printf("========== Serving Benchmark Result (%s) ==========\n", level.label.c_str());
  std::printf("%-40s%12s\n", "Max concurrency:",
              level.concurrency > 0 ? std::to_string(level.concurrency).c_str() : "none");
  std::printf("%-40s%12s\n", "Request rate (req/s):", rate_text(level.rate).c_str());
  count("Successful requests:", m.completed);
  count("Failed requests:", m.failed);
  line("Benchmark duration (s):", m.duration);
  count("Total input tokens:", m.total_input);
  count("Total generated tokens:", m.total_output);
  line("Request throughput (req/s):", m.request_throughput);
  line("Output token throughput (tok/s):", m.output_throughput);
  line("Total token throughput (tok/s):", m.total_token_throughput);
  const auto block = [&](const char* title, const char* name, const bench::Summary& s) {
    section(title);
    const std::string n(name);
    line(("Mean " + n + " (ms):").c_str(), s.mean * 1e3);
    line(("Median " + n + " (ms):").c_str(), s.median * 1e3);
    line(("P99 " + n + " (ms):").c_str(), s.p99 * 1e3);
  };
  block("Time to First Token", "TTFT", m.ttft);
  block("Time per Output Token (excl. 1st token)", "TPOT", m.tpot);
  block("Inter-token Latency", "ITL", m.itl);
  block("End-to-end Latency", "E2EL", m.e2el);
  if (!spec.proposer.empty()) {
    section(("Speculative Decoding (" + spec.proposer + ")").c_str());
    count("Drafts:", static_cast<long>(spec.drafts));
    count("Draft tokens:", static_cast<long>(spec.draft_tokens));
    count("Accepted tokens:", static_cast<long>(spec.accepted_tokens));
    line("Acceptance rate (%):", 100.0 * spec.acceptance_rate());
    line("Mean accepted length (tokens/step):", spec.mean_accepted_length());
  }
  if (!m.failures.empty()) {
    section("Failures");
    for (const auto& [reason, n] : m.failures) std::printf("%6d x %s\n", n, reason.c_str());
  }
  std::printf("%s\n", std::string(52, '=').c_str());
  std::fflush(stdout);
}

// With speculative decoding's counters, two more columns: acceptance rate and tokens per
// verify step.
void print_sweep_table(const std::vector<Level>& levels, const std::vector<bench::LevelMetrics>& ms,
                       const std::vector<SpecDecodeMetrics>& specs) {
  const bool spec = std::any_of(specs.begin(), specs.end(),
                                [](const SpecDecodeMetrics& x) { return !x.proposer.empty(); });
  std::printf("\n%-14s %5s %5s %8s %10s %9s %9s %9s %9s %9s %9s %9s %9s", "level", "ok", "fail",
              "req/s", "out_tok/s", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "itl_p50",
              "itl_p99", "e2el_p50", "e2el_p99");
  std::printf(spec ? " %6s %7s\n" : "\n", "acc%", "acc_len");
  for (size_t i = 0; i < levels.size(); ++i) {
    const auto& m = ms[i];
    std::printf("%-14s %5d %5d %8.2f %10.1f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.1f %9.1f",
                levels[i].label.c_str(), m.completed, m.failed, m.request_throughput,
                m.output_throughput, m.ttft.median * 1e3, m.ttft.p99 * 1e3, m.tpot.median * 1e3,
                m.tpot.p99 * 1e3, m.itl.median * 1e3, m.itl.p99 * 1e3, m.e2el.median * 1e3,
                m.e2el.p99 * 1e3);
    if (spec) {
      std::printf(" %6.1f %7.2f", 100.0 * specs[i].acceptance_rate(),
                  specs[i].mean_accepted_length());
    }
    std::printf("\n");
  }
  std::printf(spec ? "(latencies in ms; acc%%: draft tokens accepted, acc_len: tokens per verify "
                     "step)\n"
                   : "(latencies in ms)\n");
  std::fflush(stdout);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error("cannot write '" + path + "'");
}

int run_serve_bench(const ServeBenchOptions& o) {
  Target t;
  if (!o.base_url.empty()) {
    const bench::BaseUrl u = bench::parse_base_url(o.base_url);
    t.host = u.host;
    t.port = u.port;
    t.prefix = u.prefix;
  } else {
    t.host = o.host;
    t.port = o.port;
  }
  if (!o.api_key.empty()) t.headers.emplace("Authorization", "Bearer " + o.api_key);
  const std::string base = "http://" +
                           (t.host.find(':') != std::string::npos ? "[" + t.host + "]" : t.host) +
                           ":" + std::to_string(t.port) + t.prefix;

  std::vector<Level> levels;
  if (!o.request_rate.empty()) {
    double rate = 0;
    if (o.request_rate == "inf") {
      rate = kInf;
    } else {
      try {
        size_t used = 0;
        rate = std::stod(o.request_rate, &used);
        if (used != o.request_rate.size()) rate = -1;
      } catch (const std::exception&) {
        rate = -1;
      }
      if (!(rate > 0)) throw Error("--request-rate must be a positive number or 'inf'");
    }
    std::string label = "rate=" + rate_text(rate);
    if (o.max_concurrency > 0) label += ",max=" + std::to_string(o.max_concurrency);
    levels.push_back({label, o.max_concurrency, rate});
  } else {
    for (int c : o.sweep.empty() ? o.concurrency : o.sweep) {
      levels.push_back({"c=" + std::to_string(c), c, kInf});
    }
  }
  const bool progress = !o.no_progress && (o.progress || isatty(STDERR_FILENO) != 0);

  std::string model = o.model;
  if (model.empty()) model = discover_model(t);
  if (model.empty()) model = "bench";
  const std::vector<std::string> dataset =
      o.dataset.empty() ? std::vector<std::string>{} : read_dataset(o.dataset);

  std::mt19937_64 rng(o.seed);
  std::fprintf(stderr, "bench serve: %s  model %s  %s prompts, %d output tokens each\n",
               base.c_str(), model.c_str(),
               dataset.empty() ? ("random " + std::to_string(o.input_len) + "-token").c_str()
                               : ("dataset (" + std::to_string(dataset.size()) + ")").c_str(),
               o.output_len);
  {
    // One request first, as a connectivity and sanity check (and a warm-up).
    auto cli = make_client(t);
    const auto probe = make_bodies(o, model, dataset, 0, 1, rng);
    const RequestResult r = send_one(*cli, t, probe[0], o.output_len);
    if (!r.ok) {
      std::fprintf(stderr, "error: the initial test request to %s failed: %s\n", base.c_str(),
                   r.error.c_str());
      return 1;
    }
  }

  std::vector<bench::LevelMetrics> metrics;
  std::vector<SpecDecodeMetrics> specs;
  json runs = json::array(), full_runs = json::array();
  bool any_empty = false;
  size_t dataset_pos = 1;
  for (size_t li = 0; li < levels.size(); ++li) {
    const Level& level = levels[li];
    const auto bodies = make_bodies(o, model, dataset, dataset_pos, o.num_prompts, rng);
    dataset_pos += static_cast<size_t>(o.num_prompts);
    const SpecDecodeMetrics spec_before = scrape_spec(t);
    const LevelRun run = run_level(t, level, bodies, o.output_len, o.seed + li, progress);
    const SpecDecodeMetrics spec = spec_delta(scrape_spec(t), spec_before);
    const bench::LevelMetrics m = bench::compute_metrics(run.results, run.duration);
    print_level(level, m, spec);
    if (m.completed == 0) any_empty = true;
    metrics.push_back(m);
    specs.push_back(spec);

    json j = {{"label", level.label},
              {"max_concurrency", level.concurrency > 0 ? json(level.concurrency) : json(nullptr)},
              {"request_rate", std::isinf(level.rate) ? json("inf") : json(level.rate)}};
    j.update(bench::metrics_json(m));
    j["spec"] = spec_json(spec);
    runs.push_back(j);
    json ttfts = json::array(), e2els = json::array(), itls = json::array(), lens = json::array(),
         errors = json::array();
    for (const RequestResult& r : run.results) {
      ttfts.push_back(r.ok ? json(r.ttft) : json(nullptr));
      e2els.push_back(r.e2e);
      itls.push_back(r.itl);
      lens.push_back(r.output_tokens);
      errors.push_back(r.error);
    }
    j["ttfts_s"] = ttfts;
    j["e2els_s"] = e2els;
    j["itls_s"] = itls;
    j["output_lens"] = lens;
    j["errors"] = errors;
    full_runs.push_back(j);
  }
  if (levels.size() > 1) print_sweep_table(levels, metrics, specs);

  const json head = {{"benchmark", "serve"},
                     {"base_url", base},
                     {"model", model},
                     {"dataset", o.dataset.empty() ? json("random") : json(o.dataset)},
                     {"num_prompts", o.num_prompts},
                     {"input_len", dataset.empty() ? json(o.input_len) : json(nullptr)},
                     {"output_len", o.output_len},
                     {"spec_tokens", o.spec_tokens >= 0 ? json(o.spec_tokens) : json(nullptr)},
                     {"json_schema", o.json_schema.empty() ? json(nullptr) : json(o.json_schema)},
                     {"seed", o.seed}};
  json line = head;
  line["runs"] = runs;
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  if (!o.result_file.empty()) {
    json full = head;
    full["runs"] = full_runs;
    write_text(o.result_file, full.dump(2) + "\n");
    std::fprintf(stderr, "wrote %s\n", o.result_file.c_str());
  }
  if (!o.sweep.empty() || o.chart_given) {
    std::vector<bench::ChartPoint> pts;
    for (size_t i = 0; i < levels.size(); ++i) {
      const auto& m = metrics[i];
      pts.push_back({levels[i].label, m.output_throughput, m.ttft.median * 1e3, m.ttft.p99 * 1e3,
                     m.tpot.median * 1e3, m.tpot.p99 * 1e3});
    }
    const std::string title = "lift bench serve: " + model + ", " +
                              (dataset.empty() ? std::to_string(o.input_len) + " in" : "dataset") +
                              " / " + std::to_string(o.output_len) + " out tokens";
    write_text(o.chart, bench::latency_chart_svg(pts, title));
    std::fprintf(stderr, "wrote %s\n", o.chart.c_str());
  }
  return any_empty ? 1 : 0;
}

}  // namespace

void add_bench_serve(CLI::App* bench, std::function<int()>& run) {
  auto o = std::make_shared<ServeBenchOptions>();
  CLI::App* c = bench->add_subcommand(
      "serve", "Load a running OpenAI-compatible server with streamed completions");
  auto* url = c->add_option("--base-url", o->base_url,
                            "Server, http://host[:port][/prefix] (a trailing /v1 is dropped)");
  auto* host = c->add_option("--host", o->host, "Server address (without --base-url)");
  auto* port = c->add_option("--port", o->port, "Server port (without --base-url)");
  url->excludes(host)->excludes(port);
  auto* conc = c->add_option("--concurrency", o->concurrency,
                             "Requests in flight, a closed loop; a list (1,4,8) runs each")
                   ->delimiter(',')
                   ->check(CLI::Range(1, 100000));
  auto* rate = c->add_option("--request-rate", o->request_rate,
                             "Poisson arrivals at this many requests/s ('inf': all at once)");
  auto* maxc = c->add_option("--max-concurrency", o->max_concurrency,
                             "With --request-rate: at most this many requests in flight")
                   ->check(CLI::Range(1, 100000));
  auto* sweep = c->add_option("--sweep", o->sweep,
                              "Concurrency levels to run in turn, e.g. 1,2,4,8,16; writes --chart")
                    ->delimiter(',')
                    ->check(CLI::Range(1, 100000));
  rate->excludes(conc)->excludes(sweep);
  conc->excludes(sweep);
  maxc->needs(rate);
  c->add_option("--num-prompts", o->num_prompts, "Requests per level")
      ->check(CLI::Range(1, 1000000));
  c->add_option("--input-len", o->input_len, "Prompt tokens (random prompts)")
      ->check(CLI::Range(1, 1 << 20));
  c->add_option("--output-len", o->output_len, "Generated tokens per request (exact)")
      ->check(CLI::Range(1, 1 << 20));
  c->add_option("--vocab", o->vocab, "Random prompt ids are drawn from [3, vocab)")
      ->check(CLI::Range(4, 1 << 30));
  c->add_option("--dataset", o->dataset, "Prompts as text, one per line (instead of random ids)");
  c->add_option("--spec-tokens", o->spec_tokens,
                "Send spec_tokens (lift's extension): most draft tokens per step for each "
                "request, 0 = no speculation (default: not sent, the server's --spec-tokens)")
      ->check(CLI::Range(0, 16));
  c->add_option("--json-schema", o->json_schema,
                "Constrain every request to this JSON Schema file (sent as response_format); "
                "pick one no text of --output-len tokens completes, so each request runs to "
                "its length");
  c->add_option("--model", o->model, "Model name to send (default: the server's first model)");
  c->add_option("--api-key", o->api_key, "Bearer key");
  c->add_option("--seed", o->seed, "Seed of the prompts and arrival times");
  c->add_option("--result-file", o->result_file, "Write the full results as JSON here");
  auto* chart = c->add_option("--chart", o->chart,
                              "Latency-vs-throughput SVG (written for --sweep, or whenever given)");
  auto* prog = c->add_flag("--progress", o->progress, "Show the progress bar even if not a TTY");
  c->add_flag("--no-progress", o->no_progress, "No progress bar")->excludes(prog);
  run = [c, o, chart] {
    if (!c->parsed()) return -1;
    o->chart_given = chart->count() > 0;
    if (!o->json_schema.empty()) {
      std::ifstream in(o->json_schema);
      if (!in) throw Error("bench serve: cannot read --json-schema " + o->json_schema);
      try {
        o->schema = nlohmann::ordered_json::parse(in);
      } catch (const nlohmann::ordered_json::exception& e) {
        throw Error("bench serve: --json-schema " + o->json_schema + " is not JSON: " + e.what());
      }
    }
    return run_serve_bench(*o);
  };
}

}  // namespace lift::cli
