// KV memory waste of the paged cache against whole-request reservations.
//
// Replays a synthetic workload (prompt lengths uniform in [32, 1024], output lengths uniform
// in [16, 512], all requests queued at t = 0) under a fixed budget of KV token slots. Each
// step admits waiting requests first come first served while memory allows, then every
// running request stores one more token; a request that has stored prompt + output tokens
// finishes and releases its memory at the end of the step.
//
//   paged            slots come from the BlockManager one block at a time; admission needs
//                    the blocks for the stored tokens plus a 1% watermark; if a step's blocks
//                    run out, the most recently admitted request is preempted (freed and
//                    requeued at the front, to be recomputed).
//   reserve_max      prompt + max_tokens (512) slots reserved at admission;
//   reserve_oracle   prompt + the actual output length reserved (a perfect max_tokens);
//   reserve_context  context_length (4096) slots reserved per request.
//
// waste = sum over steps (allocated slots - stored tokens) / sum over steps allocated slots.
// Also printed: most and mean requests running at once, mean allocated share of the budget,
// steps to finish the workload, and (paged) preemptions and the tokens they recompute.
//
// Usage: lift_kv_waste_bench [--requests N] [--budget SLOTS] [--seed S]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kv/block_manager.h"

namespace {

struct Request {
  size_t prompt, output;
};

struct Result {
  std::string policy;
  size_t block_size = 0;
  double waste = 0;
  size_t max_concurrent = 0;
  double mean_concurrent = 0;
  size_t steps = 0;
  size_t preemptions = 0;
  size_t recomputed = 0;  // tokens prefilled again after preemption
  double mem_used = 0;    // mean allocated slots / budget
};

struct Tally {
  double allocated = 0, stored = 0, running = 0;
  size_t steps = 0, max_running = 0;
  void add(size_t alloc, size_t store, size_t n_running) {
    allocated += static_cast<double>(alloc);
    stored += static_cast<double>(store);
    running += static_cast<double>(n_running);
    max_running = std::max(max_running, n_running);
    ++steps;
  }
  Result result(std::string policy, size_t block_size, size_t budget, size_t preemptions,
                size_t recomputed) const {
    const double n = steps > 0 ? static_cast<double>(steps) : 1.0;
    return {std::move(policy), block_size,  allocated > 0 ? (allocated - stored) / allocated : 0.0,
            max_running,       running / n, steps,
            preemptions,       recomputed,  allocated / n / static_cast<double>(budget)};
  }
};

std::vector<Request> make_workload(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> prompt(32, 1024), output(16, 512);
  std::vector<Request> reqs(n);
  for (auto& r : reqs) {
    r.prompt = prompt(rng);
    r.output = output(rng);
  }
  return reqs;
}

// Whole-request reservations: reserve(r) slots held from admission to the end.
template <typename Reserve>
Result run_reserved(const std::vector<Request>& reqs, size_t budget, const std::string& name,
                    Reserve reserve) {
  struct Running {
    size_t id, generated, reserved;
  };
  std::deque<size_t> waiting;
  for (size_t i = 0; i < reqs.size(); ++i) waiting.push_back(i);
  std::vector<Running> running;
  size_t reserved_total = 0;
  Tally tally;
  while (!waiting.empty() || !running.empty()) {
    while (!waiting.empty() && reserved_total + reserve(reqs[waiting.front()]) <= budget) {
      const size_t id = waiting.front();
      waiting.pop_front();
      running.push_back({id, 0, reserve(reqs[id])});
      reserved_total += running.back().reserved;
    }
    if (running.empty()) {
      std::fprintf(stderr, "%s: a request does not fit the budget\n", name.c_str());
      std::exit(1);
    }
    size_t stored = 0;
    for (auto& r : running) {
      ++r.generated;
      stored += reqs[r.id].prompt + r.generated;
    }
    tally.add(reserved_total, stored, running.size());
    std::erase_if(running, [&](const Running& r) {
      if (r.generated < reqs[r.id].output) return false;
      reserved_total -= r.reserved;
      return true;
    });
  }
  return tally.result(name, 0, budget, 0, 0);
}

Result run_paged(const std::vector<Request>& reqs, size_t budget, size_t block_size) {
  struct Running {
    size_t id, generated;
    lift::BlockTable table;
  };
  lift::BlockManager bm(budget / block_size, block_size, /*prefix_caching=*/false);
  const size_t watermark = std::max<size_t>(1, bm.n_total() / 100);
  std::deque<std::pair<size_t, size_t>> waiting;  // (request, tokens generated before)
  for (size_t i = 0; i < reqs.size(); ++i) waiting.emplace_back(i, 0);
  std::vector<Running> running;
  std::vector<std::pair<int32_t, int32_t>> copies;
  std::vector<int32_t> no_tokens;
  Tally tally;
  size_t preemptions = 0, recomputed = 0;
  while (!waiting.empty() || !running.empty()) {
    // Admit: the stored tokens (prompt, plus what a preempted request had generated).
    while (!waiting.empty()) {
      const auto [id, generated] = waiting.front();
      const size_t len = reqs[id].prompt + generated;
      if (bm.blocks_for(len) + watermark > bm.n_available() && !running.empty()) break;
      Running r{id, generated, {}};
      bm.allocate_prompt(r.table, no_tokens);
      if (!bm.append_slots(r.table, len, &copies)) break;  // only when nothing runs
      if (generated > 0) recomputed += len;
      running.push_back(std::move(r));
      waiting.pop_front();
    }
    if (running.empty()) {
      std::fprintf(stderr, "paged: a request does not fit the budget\n");
      std::exit(1);
    }
    // Every running request stores one token; preempt the newest while blocks are short.
    for (;;) {
      size_t need = 0;
      for (const auto& r : running) need += r.table.n_tokens % block_size == 0 ? 1 : 0;
      if (need <= bm.n_available() || running.size() <= 1) break;
      Running& victim = running.back();
      bm.free(victim.table);
      waiting.emplace_front(victim.id, victim.generated);
      running.pop_back();
      ++preemptions;
    }
    size_t stored = 0;
    for (auto& r : running) {
      if (!bm.append_slots(r.table, 1, &copies)) {
        std::fprintf(stderr, "paged: a request outgrew the whole budget\n");
        std::exit(1);
      }
      ++r.generated;
      stored += r.table.n_tokens;
    }
    tally.add(bm.n_used() * block_size, stored, running.size());
    std::erase_if(running, [&](Running& r) {
      if (r.generated < reqs[r.id].output) return false;
      bm.free(r.table);
      return true;
    });
  }
  return tally.result("paged", block_size, budget, preemptions, recomputed);
}

size_t arg(int argc, char** argv, const char* name, size_t def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::stoull(argv[i + 1]);
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n_requests = arg(argc, argv, "--requests", 200);
  const size_t budget = arg(argc, argv, "--budget", 16384);
  const size_t seed = arg(argc, argv, "--seed", 0);
  const size_t context_length = 4096, max_tokens = 512;
  const auto reqs = make_workload(n_requests, seed);

  std::vector<Result> results;
  for (size_t bs : {8, 16, 32}) results.push_back(run_paged(reqs, budget, bs));
  results.push_back(run_reserved(reqs, budget, "reserve_max",
                                 [&](const Request& r) { return r.prompt + max_tokens; }));
  results.push_back(run_reserved(reqs, budget, "reserve_oracle",
                                 [](const Request& r) { return r.prompt + r.output; }));
  results.push_back(run_reserved(reqs, budget, "reserve_context",
                                 [&](const Request&) { return context_length; }));

  std::printf(
      "KV waste: %zu requests (prompt U[32,1024], output U[16,512], seed %zu), "
      "budget %zu token slots\n\n",
      n_requests, seed, budget);
  std::printf("%-16s %6s %8s %9s %10s %10s %7s %12s %11s\n", "policy", "block", "waste%",
              "max_conc", "mean_conc", "mem_used%", "steps", "preemptions", "recomputed");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) {
    const std::string block = r.block_size ? std::to_string(r.block_size) : "-";
    std::printf("%-16s %6s %8.2f %9zu %10.2f %10.2f %7zu %12zu %11zu\n", r.policy.c_str(),
                block.c_str(), 100.0 * r.waste, r.max_concurrent, r.mean_concurrent,
                100.0 * r.mem_used, r.steps, r.preemptions, r.recomputed);
    rows.push_back({{"policy", r.policy},
                    {"block_size", r.block_size},
                    {"waste", r.waste},
                    {"max_concurrent", r.max_concurrent},
                    {"mean_concurrent", r.mean_concurrent},
                    {"steps", r.steps},
                    {"preemptions", r.preemptions},
                    {"recomputed_tokens", r.recomputed},
                    {"mean_memory_used", r.mem_used}});
  }
  const nlohmann::json line = {
      {"bench", "kv_waste"},    {"requests", n_requests},           {"seed", seed},
      {"budget_slots", budget}, {"context_length", context_length}, {"max_tokens", max_tokens},
      {"results", rows}};
  std::printf("\n%s\n", line.dump().c_str());
  return 0;
}
