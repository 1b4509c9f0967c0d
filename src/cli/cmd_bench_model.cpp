// lift bench model: llama-bench-like prefill (pp) and decode (tg) speed of one model, with the
// machine's limits measured in the same run, so every figure is also a fraction of what the
// hardware allows: tg against the memory-bandwidth bound, pp against the compute peak.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>

#include "cli/commands.h"
#include "cli/timing.h"
#include "kernels/act_quant.h"
#include "kernels/isa.h"
#include "kernels/probes.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "parallel/comm.h"
#include "parallel/tp_backend.h"
#include "parallel/tp_step.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace lift::cli {

namespace {

struct ModelBenchOptions {
  std::string model;
  int prompt = 512;
  int gen = 128;
  int depth = 0;  // tokens already in the sequence's cache before pp and tg (llama-bench's -d)
  int threads = 2;
  int reps = 5;
  std::vector<int> batch;
  std::vector<int> step_tokens;
  int contend = 0;
  bool exact_activations = false;
  bool probes = true;
  std::string kv_type = "f32";
  int tp = 1;
};

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// Runs sequences through the model directly (no scheduler): each gets its own run of blocks.
class Bench {
 public:
  Bench(LlamaModel& m, Backend& be, size_t n_seqs, size_t max_len, KvType kv_type,
        TpLeader* tp = nullptr)
      : m_(m),
        be_(be),
        kv_(m.config(), n_seqs * ((max_len + 15) / 16), 16, kv_type,
            tp != nullptr ? tp->shard() : TpShard{}),
        tp_(tp) {
    m_.set_context_length(max_len);
    if (tp_ != nullptr) tp_->send_geometry(kv_, max_len);
    const size_t per = (max_len + 15) / 16;
    tables_.resize(n_seqs);
    for (size_t s = 0; s < n_seqs; ++s) {
      tables_[s].resize(per);
      std::iota(tables_[s].begin(), tables_[s].end(), static_cast<int32_t>(s * per));
    }
    logits_.resize(n_seqs * static_cast<size_t>(m.config().n_vocab));
  }
  // The first `depth` positions of every sequence as a prompt, in chunks of 512 (as the
  // scheduler's token budget would cut it): the context pp and tg then run after.
  void fill(size_t seqs, int depth) {
    for (int pos = 0; pos < depth; pos += 512) {
      step(seqs, pos, std::min(512, depth - pos), kernels::RowKind::prompt);
    }
  }
  // k tokens for each of `seqs` sequences at positions [pos, pos + k): prompt tokens (a
  // prefill) or generated ones (decode steps).
  void step(size_t seqs, int pos, int k, kernels::RowKind kind) {
    last_pos_ = pos;
    tok_.clear();
    posv_.clear();
    tab_.clear();
    rows_.clear();
    for (size_t s = 0; s < seqs; ++s) {
      for (int j = 0; j < k; ++j) {
        tok_.push_back(
            static_cast<int32_t>(3 + (rng_() % static_cast<uint64_t>(m_.config().n_vocab - 3))));
        posv_.push_back(pos + j);
        tab_.push_back(tables_[s].data());
      }
      rows_.push_back(static_cast<int32_t>(tok_.size() - 1));
    }
    const size_t n_prompt = kind == kernels::RowKind::prompt ? tok_.size() : 0;
    const ForwardBatch batch{tok_, posv_, tab_, rows_, n_prompt};
    if (tp_ != nullptr) {
      tp_->forward(m_, be_, batch, kv_, logits_.data());
    } else {
      m_.forward(be_, batch, kv_, logits_.data());
    }
  }
  // The first position of the last step: what the output reports pp and tg ran at.
  int last_pos() const { return last_pos_; }

 private:
  int last_pos_ = 0;
  LlamaModel& m_;
  Backend& be_;
  KvCache kv_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> tok_, posv_, rows_;
  std::vector<const int32_t*> tab_;
  std::vector<float> logits_;
  std::mt19937_64 rng_{42};
  TpLeader* tp_;
};

// A process that keeps one core busy, to see how lift shares a machine. (Forked while the
// pool's threads exist: the child only spins, touching no lock or allocator.)
struct Contender {
  pid_t pid = -1;
  explicit Contender(int n) {
    if (n <= 0) return;
    pid = fork();
    if (pid == 0) {
      volatile uint64_t x = 0;
      for (;;) x = x + 1;
    }
  }
  ~Contender() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// Every position a measurement writes must be inside the model's context; says which option
// to lower otherwise (the forward pass would stop half-way with a bare position error).
void check_fits(const ModelBenchOptions& o, int context) {
  const auto fits = [&](int64_t positions, const std::string& what) {
    if (positions <= context) return;
    throw Error("bench model: " + what + " needs " + std::to_string(positions) +
                " positions, more than this model's context of " + std::to_string(context) +
                " tokens");
  };
  if (o.depth < 0) throw Error("bench model: -d must not be negative");
  const std::string at = o.depth > 0 ? " after -d " + std::to_string(o.depth) : "";
  fits(static_cast<int64_t>(o.depth) + o.prompt, "-p " + std::to_string(o.prompt) + at);
  fits(static_cast<int64_t>(o.depth) + o.gen, "-n " + std::to_string(o.gen) + at);
  if (!o.batch.empty()) fits(16 + 32, "--batch (16 prompt + 32 decode tokens per sequence)");
  for (const int k : o.step_tokens) {
    if (k < 1)
      throw Error("bench model: --step-tokens must be at least 1, got " + std::to_string(k));
    fits(64 + static_cast<int64_t>(k),
         "--step-tokens " + std::to_string(k) + " (after 64 prompt tokens)");
  }
  for (const int b : o.batch) {
    if (b < 1) throw Error("bench model: --batch must be at least 1, got " + std::to_string(b));
  }
}

int run_model_bench(const ModelBenchOptions& o) {
  Comm* comm = o.tp > 1 ? &Comm::world(o.tp) : nullptr;
  if (comm != nullptr && (!o.batch.empty() || !o.step_tokens.empty() || o.contend > 0)) {
    throw Error("bench model --tp measures pp and tg only (no --batch, --step-tokens, --contend)");
  }
  auto model = LlamaModel::load(o.model, Comm::shard_of(comm));
  const ModelConfig& cfg = model->config();
  check_fits(o, cfg.context_length);
  ThreadPool pool(o.threads);
  BackendOptions bo;
  bo.quantize_activations = !o.exact_activations;
  std::unique_ptr<Backend> be = make_cpu_backend(pool, bo);
  std::unique_ptr<TpLeader> tp;
  if (comm != nullptr) {
    be = std::make_unique<TpBackend>(std::move(be), *comm);
    if (!comm->leader()) {
      tp_follow(*comm, *model, *be);
      return 0;
    }
    tp = std::make_unique<TpLeader>(*comm);
  }
  const KvType kv_type = parse_kv_type(o.kv_type);

  MachineProbe before, after;
  if (o.probes) before = probe_machine(pool);

  // Bytes one decode step of one sequence reads: every weight but the embedding table (one
  // row of it), unless the output projection reuses it; of the experts' stacks, the
  // experts_used its token runs. Parameters a prompt token multiplies: likewise.
  size_t step_bytes = 0, matmul_params = 0;
  const double expert_share =
      cfg.n_experts > 0 ? static_cast<double>(cfg.n_experts_used) / cfg.n_experts : 1.0;
  for (const auto& t : model->file().tensors()) {
    if (t.name == "token_embd.weight" && !model->tied_output()) continue;
    const bool stack = t.n_dims == 3;
    step_bytes +=
        stack ? static_cast<size_t>(static_cast<double>(t.n_bytes) * expert_share) : t.n_bytes;
    if (t.n_dims >= 2 && t.name != "token_embd.weight" && t.name != "output.weight") {
      matmul_params +=
          stack ? static_cast<size_t>(static_cast<double>(t.n_elems) * expert_share) : t.n_elems;
    }
  }
  GgmlType wtype = GgmlType::F32;
  for (const auto& t : model->file().tensors()) {
    if (t.name == "blk.0.ffn_up.weight" || t.name == "blk.0.ffn_up_exps.weight") wtype = t.type;
  }
  const bool int8_path =
      kernels::act_format(wtype, !o.exact_activations) != kernels::ActFormat::f32;

  const size_t kv_per_token = KvCache::bytes_per_token(cfg, kv_type);
  // Read bandwidth measured between the tg repetitions too: each repetition is compared with
  // the mean of the probes just before and after it.
  std::unique_ptr<ReadBandwidthProbe> rep_probe;
  if (o.probes) rep_probe = std::make_unique<ReadBandwidthProbe>(pool, size_t{256} << 20);
  std::vector<double> tg_bw;   // o.reps + 1 probes around the (last) tg repetitions
  int pp_pos = 0, tg_pos = 0;  // the first position pp and tg ran at
  auto measure = [&](std::vector<double>& pp, std::vector<double>& tg) {
    for (int r = 0; r < o.reps; ++r) {
      Bench b(*model, *be, 1, static_cast<size_t>(o.depth + o.prompt), kv_type, tp.get());
      b.fill(1, o.depth);
      const auto t0 = Clock::now();
      b.step(1, o.depth, o.prompt, kernels::RowKind::prompt);
      pp.push_back(o.prompt / secs(Clock::now() - t0));
      pp_pos = b.last_pos();
    }
    tg_bw.clear();
    for (int r = 0; r < o.reps; ++r) {
      Bench b(*model, *be, 1, static_cast<size_t>(o.depth + o.gen), kv_type, tp.get());
      b.fill(1, o.depth);
      if (rep_probe && r == 0) tg_bw.push_back(rep_probe->measure(3));
      const auto t0 = Clock::now();
      for (int i = 0; i < o.gen; ++i) {
        b.step(1, o.depth + i, 1, kernels::RowKind::generated);
        if (i == 0) tg_pos = b.last_pos();
      }
      tg.push_back(o.gen / secs(Clock::now() - t0));
      if (rep_probe) tg_bw.push_back(rep_probe->measure(3));
    }
  };
  // With --contend, the same measurements first on a quiet machine, then with one core kept
  // busy: the ratio is taken within this run.
  std::vector<double> pp, tg, pp_quiet, tg_quiet;
  if (o.contend > 0) measure(pp_quiet, tg_quiet);
  std::unique_ptr<Contender> contender;
  if (o.contend > 0) contender = std::make_unique<Contender>(o.contend);
  measure(pp, tg);
  contender.reset();
  if (tp) tp->stop();  // the followers leave (and stop polling) before the closing probes
  nlohmann::json j = {{"model", o.model},
                      {"threads", pool.size()},
                      {"tp", o.tp},
                      {"isa", std::string(kernels::isa_name(kernels::active_isa()))},
                      {"weight_type", std::string(ggml_type_name(wtype))},
                      {"contend", o.contend}};
  const Stats ps = stats(pp), ts = stats(tg);
  std::printf("model %s (%s weights), %d threads, isa %s%s\n", o.model.c_str(),
              std::string(ggml_type_name(wtype)).c_str(), pool.size(),
              std::string(kernels::isa_name(kernels::active_isa())).c_str(),
              o.contend ? ", one core kept busy by another process" : "");
  const std::string depth = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
  std::printf("pp%-4d%s %9.1f t/s  (min %.1f, max %.1f)\n", o.prompt, depth.c_str(), ps.median,
              ps.min, ps.max);
  std::printf("tg%-4d%s %9.1f t/s  (min %.1f, max %.1f)\n", o.gen, depth.c_str(), ts.median, ts.min,
              ts.max);
  j["depth"] = o.depth;
  j["pp"] = {{"tokens", o.prompt},
             {"first_position", pp_pos},
             {"median", ps.median},
             {"min", ps.min},
             {"max", ps.max}};
  j["tg"] = {{"tokens", o.gen},
             {"first_position", tg_pos},
             {"median", ts.median},
             {"min", ts.min},
             {"max", ts.max}};
  if (o.contend > 0) {
    const Stats pq = stats(pp_quiet), tq = stats(tg_quiet);
    std::printf(
        "uncontended in this run: pp %.1f t/s, tg %.1f t/s; contended tg is %.0f%% of it, "
        "pp %.0f%%\n",
        pq.median, tq.median, 100.0 * ts.median / tq.median, 100.0 * ps.median / pq.median);
    j["uncontended"] = {{"pp_median", pq.median}, {"tg_median", tq.median}};
    j["tg_pct_of_uncontended"] = 100.0 * ts.median / tq.median;
  }

  for (int bsz : o.batch) {
    Bench b(*model, *be, static_cast<size_t>(bsz), 16 + 32, kv_type);
    b.step(static_cast<size_t>(bsz), 0, 16, kernels::RowKind::prompt);
    const auto t0 = Clock::now();
    for (int i = 0; i < 32; ++i)
      b.step(static_cast<size_t>(bsz), 16 + i, 1, kernels::RowKind::generated);
    const double tps = bsz * 32 / secs(Clock::now() - t0);
    std::printf("decode, %2d parallel sequences: %9.1f t/s aggregate\n", bsz, tps);
    j["batch"].push_back({{"sequences", bsz}, {"tokens_per_s", tps}});
  }
  // Steps of every size are timed in turn, round after round, so that a slow spell of the
  // machine hits all sizes alike; the ratios come from medians over the rounds.
  if (!o.step_tokens.empty()) {
    std::vector<std::unique_ptr<Bench>> benches;
    for (size_t i = 0; i < o.step_tokens.size(); ++i) {
      benches.push_back(std::make_unique<Bench>(*model, *be, 1, 64 + 64, kv_type));
      benches.back()->step(1, 0, 64, kernels::RowKind::prompt);
    }
    std::vector<std::vector<double>> t(o.step_tokens.size());
    for (int round = 0; round < 25; ++round) {
      for (size_t i = 0; i < o.step_tokens.size(); ++i) {
        const auto t0 = Clock::now();
        benches[i]->step(1, 64, o.step_tokens[i], kernels::RowKind::generated);
        t[i].push_back(secs(Clock::now() - t0));
      }
    }
    double one_step = 0;
    for (size_t i = 0; i < o.step_tokens.size(); ++i) {
      const int k = o.step_tokens[i];
      const double ms = stats(t[i]).median * 1e3;
      if (k == 1) one_step = ms;
      std::printf(
          "one sequence, step of %2d tokens: %8.2f ms%s\n", k, ms,
          one_step > 0 && k != 1
              ? (" (" + std::to_string(ms / one_step).substr(0, 4) + "x a 1-token step)").c_str()
              : "");
      j["step_tokens"].push_back({{"tokens", k}, {"ms", ms}});
    }
  }

  if (o.probes) {
    after = probe_machine(pool);
    const double bw = (before.read_gbps + after.read_gbps) / 2;
    const double fp32 = (before.fp32_gflops + after.fp32_gflops) / 2;
    const double int8 = (before.int8_gops + after.int8_gops) / 2;
    // The K/V a step reads: every position before it, on average the depth plus half of tg.
    const double mean_context = o.depth + o.gen / 2.0;
    const double bytes =
        static_cast<double>(step_bytes) + static_cast<double>(kv_per_token) * mean_context;
    const double bound = bw * 1e9 / bytes;
    // Prefill arithmetic: 2 flops per weight per token, plus attention (QK and PV) at the
    // mean context.
    const double attn = 4.0 * cfg.n_layers * cfg.dim * (o.depth + o.prompt / 2.0);
    const double pp_ops = ps.median * (2.0 * static_cast<double>(matmul_params) + attn) / 1e9;
    const double peak = int8_path ? int8 : fp32;
    const char* int8_name =
        kernels::active_isa() >= kernels::Isa::avx512 ? "int8 VNNI" : "int8 AVX2 maddubs";
    std::printf(
        "machine: read %.1f GB/s (before %.1f, after %.1f), fp32 FMA %.0f GFLOP/s, %s %.0f "
        "GOP/s\n",
        bw, before.read_gbps, after.read_gbps, fp32, int8_name, int8);
    std::printf(
        "decode bound %.1f t/s (%.1f MB per step at mean context %.0f); tg is %.0f%% of it\n",
        bound, bytes / 1e6, mean_context, 100 * ts.median / bound);
    // Each tg repetition against the bandwidth read just before and after it.
    std::vector<double> paired;
    std::string each;
    for (size_t r = 0; r < tg.size() && r + 1 < tg_bw.size(); ++r) {
      const double bw_r = (tg_bw[r] + tg_bw[r + 1]) / 2;
      paired.push_back(100 * tg[r] * bytes / (bw_r * 1e9));
      each += (each.empty() ? "" : ", ") + std::to_string(static_cast<int>(paired.back() + 0.5)) +
              "% at " + std::to_string(static_cast<int>(bw_r + 0.5)) + " GB/s";
    }
    const Stats pr = stats(paired);
    std::printf("tg against the bandwidth read around each repetition: median %.0f%% (%s)\n",
                pr.median, each.c_str());
    j["tg_pct_of_bound_paired"] = pr.median;
    j["tg_bw_gbps"] = tg_bw;
    std::printf("prefill %.0f G%s/s = %.0f%% of the %s peak\n", pp_ops, int8_path ? "OP" : "FLOP",
                100 * pp_ops / peak, int8_path ? int8_name : "fp32 FMA");
    // F16/BF16 prompt rows on AMX tiles do 4 (F16) or 2 (BF16) bf16 tile products per
    // multiply-add; the peak above stays the FMA one, the yardstick of the f32 path.
    const bool amx = kernels::act_format(wtype, !o.exact_activations, kernels::RowKind::prompt) ==
                     kernels::ActFormat::bf16x2;
    if (amx) std::printf("prefill products ran on AMX-BF16 tiles (exact weight split, bf16x2 x)\n");
    j["pp_on_amx"] = amx;
    j["machine"] = {{"read_gbps", bw},
                    {"read_gbps_before", before.read_gbps},
                    {"read_gbps_after", after.read_gbps},
                    {"fp32_gflops", fp32},
                    {"int8_gops", int8}};
    j["decode_bound_tps"] = bound;
    j["tg_pct_of_bound"] = 100 * ts.median / bound;
    j["pp_gops"] = pp_ops;
    j["pp_pct_of_peak"] = 100 * pp_ops / peak;
    j["pp_peak"] = int8_path ? "int8" : "fp32";
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

void add_bench_model(CLI::App* bench, std::function<int()>& run) {
  auto o = std::make_shared<ModelBenchOptions>();
  CLI::App* c = bench->add_subcommand("model", "Prefill/decode speed against the machine's limits");
  c->add_option("-m,--model", o->model, "GGUF model")->required();
  c->add_option("-p,--prompt", o->prompt, "Prefill tokens (pp)")->check(CLI::Range(1, 1 << 16));
  c->add_option("-n,--gen", o->gen, "Decode tokens (tg)")->check(CLI::Range(1, 1 << 16));
  c->add_option("-d,--depth", o->depth,
                "Tokens of context already in the cache before pp and tg (as llama-bench -d)")
      ->check(CLI::Range(0, 1 << 20));
  c->add_option("-t,--threads", o->threads, "Threads");
  c->add_option("-r,--reps", o->reps, "Repetitions")->check(CLI::Range(1, 1000));
  c->add_option("--batch", o->batch, "Parallel sequences for aggregate decode, e.g. 1,2,4,8,16")
      ->delimiter(',');
  c->add_option("--step-tokens", o->step_tokens, "Tokens in one sequence's step, e.g. 1,2,4,8")
      ->delimiter(',');
  c->add_option("--contend", o->contend, "Keep one core busy with a spinning process");
  c->add_option("--kv-type", o->kv_type, "f32 or f16");
  c->add_flag("--exact-activations", o->exact_activations, "f32 activations for quantized weights");
  c->add_flag("!--no-probes", o->probes, "Skip the bandwidth and peak probes");
  c->add_option("--tp", o->tp,
                "Tensor-parallel ranks (under mpirun -np N; -t threads per rank): pp and tg only")
      ->check(CLI::Range(1, 64));
  run = [c, o] { return c->parsed() ? run_model_bench(*o) : -1; };
}

}  // namespace lift::cli
