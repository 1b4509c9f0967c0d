// lift bench serve: a load generator for a running OpenAI-compatible server (lift's or
// another's). Streams completions at fixed concurrency and reports throughput and latency.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/commands.h"
#include "util/error.h"

namespace lift::cli {

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct ServeBenchOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<int> concurrency{1, 4, 8};
  int num_prompts = 32;
  int input_len = 128;
  int output_len = 64;
  int vocab = 512;  // prompt token ids are drawn from [3, vocab)
  std::string api_key;
  uint64_t seed = 0;
};

struct RequestTiming {
  double ttft = -1, e2e = 0;
  std::vector<double> gaps;
  int tokens = 0;
  bool ok = false;
};

RequestTiming one_request(const ServeBenchOptions& o, const std::vector<int>& prompt) {
  httplib::Client cli(o.host, o.port);
  cli.set_read_timeout(600, 0);
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  const nlohmann::json body = {{"model", "bench"},           {"prompt", prompt},
                               {"max_tokens", o.output_len}, {"temperature", 0},
                               {"ignore_eos", true},         {"stream", true}};
  RequestTiming t;
  const auto start = Clock::now();
  auto last = start;
  std::string buf;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = headers;
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buf.append(data, len);
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      const std::string event = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      const auto j = nlohmann::json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded() || !j.contains("choices") || j["choices"].empty()) continue;
      if (j["choices"][0].value("text", "").empty()) continue;
      const auto now = Clock::now();
      if (t.ttft < 0) {
        t.ttft = secs(now - start);
      } else {
        t.gaps.push_back(secs(now - last));
      }
      last = now;
      ++t.tokens;
    }
    return true;
  };
  auto res = cli.send(req);
  t.e2e = secs(Clock::now() - start);
  t.ok = res && res->status == 200;
  return t;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int run_serve_bench(const ServeBenchOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<int>> prompts(static_cast<size_t>(o.num_prompts));
  for (auto& p : prompts) {
    p.push_back(1);
    while (p.size() < static_cast<size_t>(o.input_len)) {
      p.push_back(3 + static_cast<int>(rng() % static_cast<uint64_t>(o.vocab - 3)));
    }
  }
  std::printf("%-11s %8s %10s %12s %12s %12s %12s %8s\n", "concurrency", "elapsed", "req/s",
              "out_tok/s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "failed");
  nlohmann::json all = nlohmann::json::array();
  for (int c : o.concurrency) {
    std::vector<RequestTiming> timings(prompts.size());
    std::atomic<size_t> next{0};
    const auto t0 = Clock::now();
    std::vector<std::thread> workers;
    for (int w = 0; w < c; ++w) {
      workers.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < prompts.size();)
          timings[i] = one_request(o, prompts[i]);
      });
    }
    for (auto& w : workers) w.join();
    const double elapsed = secs(Clock::now() - t0);
    std::vector<double> ttft, itl;
    int failed = 0;
    long tokens = 0;
    for (const auto& t : timings) {
      if (!t.ok) ++failed;
      if (t.ttft >= 0) ttft.push_back(t.ttft);
      itl.insert(itl.end(), t.gaps.begin(), t.gaps.end());
      tokens += t.tokens;
    }
    const double out_tps = static_cast<double>(tokens) / elapsed;
    std::printf("%-11d %7.2fs %10.2f %12.1f %12.1f %12.1f %12.2f %8d\n", c, elapsed,
                static_cast<double>(prompts.size()) / elapsed, out_tps, percentile(ttft, 0.5) * 1e3,
                percentile(ttft, 0.99) * 1e3, percentile(itl, 0.5) * 1e3, failed);
    std::fflush(stdout);
    all.push_back({{"concurrency", c},
                   {"elapsed_s", elapsed},
                   {"requests_per_s", static_cast<double>(prompts.size()) / elapsed},
                   {"output_tokens_per_s", out_tps},
                   {"ttft_p50_s", percentile(ttft, 0.5)},
                   {"ttft_p99_s", percentile(ttft, 0.99)},
                   {"itl_p50_s", percentile(itl, 0.5)},
                   {"itl_p99_s", percentile(itl, 0.99)},
                   {"failed", failed}});
  }
  std::printf("%s\n", nlohmann::json({{"benchmark", "serve"}, {"runs", all}}).dump().c_str());
  return 0;
}

}  // namespace

void add_bench_serve(CLI::App* bench, std::function<int()>& run) {
  auto o = std::make_shared<ServeBenchOptions>();
  CLI::App* c = bench->add_subcommand("serve", "Load a running server with streamed completions");
  c->add_option("--host", o->host, "Server address");
  c->add_option("--port", o->port, "Server port");
  c->add_option("--concurrency", o->concurrency, "Concurrent clients, e.g. 1,4,8")->delimiter(',');
  c->add_option("--num-prompts", o->num_prompts, "Requests per concurrency level");
  c->add_option("--input-len", o->input_len, "Prompt tokens");
  c->add_option("--output-len", o->output_len, "Generated tokens");
  c->add_option("--vocab", o->vocab, "Prompt ids are drawn from [3, vocab)");
  c->add_option("--api-key", o->api_key, "Bearer key");
  run = [c, o] { return c->parsed() ? run_serve_bench(*o) : -1; };
}

}  // namespace lift::cli
