// The kernels besides matmul, single-threaded: paged attention (decode: one query, reported as
// K/V bytes read per second; prefill: 16-query tiles of a causal prompt, reported as FLOP/s
// with QK and PV counted as 2 flops per multiply-add), activation quantization and SwiGLU
// (bytes of f32 input per second).
//   lift_kernel_bench --benchmark_filter='attention/'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kernels/random_kv.h"

namespace lift::kernels {
namespace {

constexpr size_t kHeadDim = 64, kKvHeads = 4, kBlock = 16;

// One layer's paged K/V for a sequence of n_ctx positions, in F32 or F16, its blocks in reverse
// order (as a busy pool may place them) or, in_order, ascending (as a pool hands out its free
// blocks: a prompt's, and a sequence decoding alone).
struct Cache {
  RandomKvPool pool;
  std::vector<int32_t> table;

  Cache(GgmlType t, size_t n_ctx, size_t head_dim = kHeadDim, bool in_order = false)
      : pool(t, head_dim * kKvHeads, kBlock, (n_ctx + kBlock - 1) / kBlock, 3, head_dim) {
    for (size_t b = 0; b < pool.n_blocks; ++b) {
      table.push_back(static_cast<int32_t>(in_order ? b : pool.n_blocks - 1 - b));
    }
  }
  KvLayerView view() const { return pool.view(); }
};

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void bm_attention_decode(benchmark::State& state, GgmlType t, size_t n_ctx) {
  const Cache cache(t, n_ctx);
  const auto q = randn(kHeadDim, 5);
  std::vector<float> out(kHeadDim), scratch(attention_scratch_floats(kBlock, kHeadDim));
  for (auto _ : state) {
    attend_head(q.data(), cache.view(), 0, kHeadDim, cache.table.data(),
                static_cast<int32_t>(n_ctx), 0.125f, scratch.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = 2.0 * static_cast<double>(n_ctx * kHeadDim) * (t == GgmlType::F16 ? 2 : 4);
  state.counters["kv_B/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

// One decode step's attention over a whole model's caches: n_layers layers of kKvHeads K/V
// heads, each with a tile of `group` query heads, at n_ctx positions. The caches (1.1B shape at
// 2,048 positions: 22 layers, 92 MB in F32) are far larger than the last-level cache, as a long
// context's are, so this measures attention reading K/V from DRAM.
void bm_attention_model(benchmark::State& state, GgmlType t, size_t n_layers, size_t n_ctx,
                        size_t group, bool in_order) {
  std::vector<Cache> layers;
  for (size_t l = 0; l < n_layers; ++l) layers.emplace_back(t, n_ctx, kHeadDim, in_order);
  const auto q = randn(group * kHeadDim, 7);
  std::vector<float> out(group * kHeadDim), scratch(attention_scratch_floats(kBlock, kHeadDim));
  std::vector<int32_t> n_of(group, static_cast<int32_t>(n_ctx));
  const float* qp[kAttentionTile];
  float* op[kAttentionTile];
  for (size_t i = 0; i < group; ++i) {
    qp[i] = q.data() + i * kHeadDim;
    op[i] = out.data() + i * kHeadDim;
  }
  for (auto _ : state) {
    for (const Cache& c : layers) {
      for (size_t h = 0; h < kKvHeads; ++h) {
        attend_tile(qp, group, c.view(), h * kHeadDim, kHeadDim, c.table.data(), n_of.data(),
                    0.125f, scratch.data(), op);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = 2.0 * static_cast<double>(n_layers * kKvHeads * n_ctx * kHeadDim) *
                       (t == GgmlType::F16 ? 2 : 4);
  state.counters["kv_B/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

// Every query of an n_ctx-token prompt, in tiles of kAttentionTile consecutive positions.
void bm_attention_prefill(benchmark::State& state, GgmlType t, size_t n_ctx) {
  const Cache cache(t, n_ctx);
  const auto q = randn(n_ctx * kHeadDim, 6);
  std::vector<float> out(n_ctx * kHeadDim), scratch(attention_scratch_floats(kBlock, kHeadDim));
  std::vector<int32_t> n_of(n_ctx);
  for (size_t i = 0; i < n_ctx; ++i) n_of[i] = static_cast<int32_t>(i + 1);
  for (auto _ : state) {
    for (size_t t0 = 0; t0 < n_ctx; t0 += kAttentionTile) {
      const float* qp[kAttentionTile];
      float* op[kAttentionTile];
      const size_t n_q = std::min(kAttentionTile, n_ctx - t0);
      for (size_t i = 0; i < n_q; ++i) {
        qp[i] = q.data() + (t0 + i) * kHeadDim;
        op[i] = out.data() + (t0 + i) * kHeadDim;
      }
      attend_tile(qp, n_q, cache.view(), 0, kHeadDim, cache.table.data(), n_of.data() + t0, 0.125f,
                  scratch.data(), op);
    }
    benchmark::DoNotOptimize(out.data());
  }
  // Causal: query i sees i + 1 positions; QK and PV are head_dim multiply-adds per position.
  const double ctx = static_cast<double>(n_ctx);
  const double macs = 2.0 * kHeadDim * ctx * (ctx + 1) / 2.0;
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * macs * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Speculative verification: one sequence's decode token and n_q - 1 drafts after it, the last
// of them at position n_ctx - 1, as one tile. Time per call; per query it shows what a draft
// row adds to a one-token step's attention.
// `group`: the n_q queries are one decode token's query heads of one K/V head (grouped-query
// attention), all at position n_ctx - 1, as the CPU backend tiles them; against n_q = 1 it
// shows what sharing the K/V reads saves per head.
void bm_attention_verify(benchmark::State& state, size_t head_dim, size_t n_ctx, size_t n_q,
                         bool group) {
  const Cache cache(GgmlType::F32, n_ctx, head_dim);
  const auto q = randn(n_q * head_dim, 10);
  std::vector<float> out(n_q * head_dim), scratch(attention_scratch_floats(kBlock, head_dim));
  std::vector<int32_t> n_of(n_q);
  const float* qp[kAttentionTile];
  float* op[kAttentionTile];
  for (size_t i = 0; i < n_q; ++i) {
    n_of[i] = static_cast<int32_t>(group ? n_ctx : n_ctx - n_q + 1 + i);
    qp[i] = q.data() + i * head_dim;
    op[i] = out.data() + i * head_dim;
  }
  for (auto _ : state) {
    attend_tile(qp, n_q, cache.view(), 0, head_dim, cache.table.data(), n_of.data(), 0.125f,
                scratch.data(), op);
    benchmark::DoNotOptimize(out.data());
  }
  // Seconds per query (the reported time divided by n_q).
  state.counters["per_query"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(n_q),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void bm_quantize(benchmark::State& state, size_t n) {
  const auto x = randn(n, 7);
  std::vector<uint8_t> out(act_row_bytes(ActFormat::q8_0, n));
  for (auto _ : state) {
    quantize_activation_row(ActFormat::q8_0, x.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["in_B/s"] =
      benchmark::Counter(4.0 * static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void bm_swiglu(benchmark::State& state, size_t n) {
  const auto g = randn(n, 8), u = randn(n, 9);
  std::vector<float> out(n);
  for (auto _ : state) {
    swiglu(g.data(), u.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["in_B/s"] =
      benchmark::Counter(8.0 * static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

int register_all() {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
    const std::string type(ggml_type_name(t));
    for (size_t n_ctx : {512u, 4096u}) {
      benchmark::RegisterBenchmark(
          ("attention/decode/" + type + "/" + std::to_string(n_ctx)).c_str(), bm_attention_decode,
          t, n_ctx)
          ->Unit(benchmark::kMicrosecond);
    }
    // Query heads per K/V head: 8 (grouped-query attention, the 1.1B shape) and 1 (MHA).
    for (size_t group : {8u, 4u, 2u, 1u}) {
      for (size_t layers : {1u, 22u}) {
        const std::string shape = std::to_string(layers) + "x2048/" + std::to_string(group);
        benchmark::RegisterBenchmark(("attention/model/" + type + "/" + shape).c_str(),
                                     bm_attention_model, t, layers, size_t{2048}, group, false)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("attention/model-in-order/" + type + "/" + shape).c_str(),
                                     bm_attention_model, t, layers, size_t{2048}, group, true)
            ->Unit(benchmark::kMicrosecond);
      }
    }
    benchmark::RegisterBenchmark(("attention/prefill/" + type + "/512").c_str(),
                                 bm_attention_prefill, t, size_t{512})
        ->Unit(benchmark::kMicrosecond);
  }
  for (size_t hd : {8u, 64u}) {
    for (size_t n_q : {1u, 2u, 5u, 9u}) {
      benchmark::RegisterBenchmark(
          ("attention/verify/F32/hd" + std::to_string(hd) + "/1024/" + std::to_string(n_q)).c_str(),
          bm_attention_verify, hd, size_t{1024}, n_q, false)
          ->Unit(benchmark::kMicrosecond);
    }
    for (size_t n_q : {1u, 2u, 4u, 8u}) {
      benchmark::RegisterBenchmark(
          ("attention/gqa/F32/hd" + std::to_string(hd) + "/1024/" + std::to_string(n_q)).c_str(),
          bm_attention_verify, hd, size_t{1024}, n_q, true)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::RegisterBenchmark("act_quant/q8_0/5632", bm_quantize, size_t{5632})
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("swiglu/5632", bm_swiglu, size_t{5632})
      ->Unit(benchmark::kMicrosecond);
  return 0;
}

const int registered = register_all();

}  // namespace
}  // namespace lift::kernels
