// Decode products streamed from DRAM, through the CPU backend as the engine runs them (8-bit
// activations, the load-time panels, columns split over the pool), against a plain read of
// memory in the same run. The decode/ entries of kernels_bench time one matrix, which stays in
// the last-level cache between iterations; a decode step reads each weight once, from DRAM.
//   lift_kernel_bench --benchmark_filter='stream/'
// (names: stream/type/n_in/n_out/threads, n_out 5632 and 2048; types without panels read their
// stored rows). Counters: GB/s of weights, read_GB/s of the plain read (the mean of one just before
// and one just after: on a shared machine the bandwidth moves within minutes) and of_read, the one
// over the other. stream-prefill/type/n_in/n_out/rows/threads: a prompt chunk's product with its
// weights from DRAM, as a prefill meets them (FLOP/s; the prefill/ entries of kernels_bench have
// them in cache).
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/isa.h"
#include "kernels/panel.h"
#include "kernels/probes.h"
#include "random_weights.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

// Enough copies that they add up to 8x a 32 MiB last-level cache.
constexpr size_t kStreamBytes = size_t{256} << 20;

void bm_stream(benchmark::State& state, GgmlType t, size_t n_in, size_t n_out, size_t rows,
               int threads) {
  ThreadPool pool(threads);
  auto backend = make_cpu_backend(pool);
  const auto w = bench::random_weights(t, n_out, n_in);
  const size_t row_bytes = ggml_row_bytes(t, n_in);
  const size_t copies = (kStreamBytes + w.size() - 1) / w.size();
  // As the model loader does: load-time panels where the active kernels have them, else the
  // stored rows (a copy each, so nothing is read from cache).
  const bool panel = kernels::panel_supported(t);
  std::vector<kernels::PanelMatrix> panels;
  std::vector<std::vector<uint8_t>> stored;
  std::vector<Matrix> ms;
  panels.reserve(copies);
  stored.reserve(copies);
  for (size_t i = 0; i < copies; ++i) {
    if (panel) {
      panels.push_back(kernels::pack_panels(t, w.data(), row_bytes, n_in, n_out));
      ms.push_back({t, w.data(), n_in, n_out, row_bytes, &panels.back()});
    } else {
      stored.push_back(w);
      ms.push_back({t, stored.back().data(), n_in, n_out, row_bytes, nullptr});
    }
  }
  std::vector<float> x(rows * n_in), y(rows * n_out);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) / 16.0f - 0.5f;
  ReadBandwidthProbe probe(pool, kStreamBytes);
  const double read_before = probe.measure(3);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (const Matrix& m : ms)
      backend->matmul(m, x.data(), Rows{rows, rows > 1 ? rows : 0}, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double read_gbps = (read_before + probe.measure(3)) / 2.0;
  const double bytes = static_cast<double>((panel ? panels[0].bytes() : w.size()) * copies);
  const double gbps = bytes * static_cast<double>(state.iterations()) / seconds / 1e9;
  state.counters["GB/s"] = gbps;
  state.counters["read_GB/s"] = read_gbps;
  state.counters["of_read"] = gbps / read_gbps;
  if (rows > 1) {
    state.counters["FLOP/s"] = 2.0 * static_cast<double>(n_in * n_out * rows * copies) *
                               static_cast<double>(state.iterations()) / seconds;
  }
}

int register_all() {
  if (kernels::best_isa() < kernels::Isa::avx2) return 0;  // stored rows only: not what is timed
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
                     GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::F16, GgmlType::BF16}) {
    for (int threads : {1, 2}) {
      // An FFN's shape, and an attention projection's: a few megabytes, which is where the
      // allocation's pages showed (util/large_alloc.h).
      for (size_t n_out : {size_t{5632}, size_t{2048}}) {
        const std::string name = "stream/" + std::string(ggml_type_name(t)) + "/2048/" +
                                 std::to_string(n_out) + "/" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), bm_stream, t, size_t{2048}, n_out, size_t{1},
                                     threads)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.5);
      }
      const std::string prefill = "stream-prefill/" + std::string(ggml_type_name(t)) +
                                  "/2048/5632/64/" + std::to_string(threads);
      benchmark::RegisterBenchmark(prefill.c_str(), bm_stream, t, size_t{2048}, size_t{5632},
                                   size_t{64}, threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace
}  // namespace lift
