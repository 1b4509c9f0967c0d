// Matmul throughput per weight type and Isa at the shapes lift runs: decode (1 or 4 activation
// rows: memory-bound, reported as weight bytes streamed per second) and prefill (64 or 512 rows:
// compute-bound, reported as FLOP/s with 2 flops per multiply-add).
//   lift_kernel_bench --benchmark_filter='decode/Q4_0'  (names: phase/type/act/isa/n_in/n_out/rows)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gguf/ggml_type.h"
#include "kernels/act_quant.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/panel.h"
#include "kernels/panel_amx.h"
#include "random_weights.h"
#include "util/large_alloc.h"

namespace lift::kernels {
namespace {

struct Shape {
  size_t n_in, n_out;
};

// Weight bytes streamed per second (decode) and FLOP/s, 2 per multiply-add.
void report(benchmark::State& state, size_t weight_bytes, Shape s, size_t rows, bool decode) {
  const double iters = static_cast<double>(state.iterations());
  if (decode) {
    state.counters["weight_B/s"] =
        benchmark::Counter(static_cast<double>(weight_bytes) * iters, benchmark::Counter::kIsRate);
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(s.n_in * s.n_out * rows) * iters, benchmark::Counter::kIsRate);
}

// phase/type/act/kernel/n_in/n_out/rows
std::string bench_name(bool decode, GgmlType t, const std::string& act, const std::string& kernel,
                       Shape s, size_t rows) {
  return std::string(decode ? "decode/" : "prefill/") + std::string(ggml_type_name(t)) + "/" + act +
         "/" + kernel + "/" + std::to_string(s.n_in) + "/" + std::to_string(s.n_out) + "/" +
         std::to_string(rows);
}

// F16/BF16 panels on AMX tiles (prompt rows on AMX machines): the activations' bf16x2 packing
// is timed with the product, as the engine does both per call.
void bm_matmul_amx(benchmark::State& state, GgmlType wt, Shape s, size_t rows, bool decode) {
  set_isa(Isa::amx);
  const auto w = bench::random_weights(wt, s.n_out, s.n_in);
  const PanelMatrix pm = pack_panels(wt, w.data(), ggml_row_bytes(wt, s.n_in), s.n_in, s.n_out);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  std::vector<float> x(s.n_in * rows), y(rows * s.n_out);
  for (auto& v : x) v = nd(rng);
  std::unique_ptr<uint8_t, decltype(&std::free)> act(
      static_cast<uint8_t*>(alloc_streamed(amx_act_bytes(s.n_in, rows))), &std::free);
  for (auto _ : state) {
    for (size_t g = 0; g < (rows + 15) / 16; ++g) {
      amx_pack_activations(x.data(), s.n_in, rows, g, act.get());
    }
    matmul_panels_amx(pm, act.get(), rows, y.data(), s.n_out, 0, s.n_out);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, w.size(), s, rows, decode);
}

// isa >= avx512 with `panels`: the weights repacked at load time (what the engine runs there).
void bm_matmul(benchmark::State& state, GgmlType wt, ActFormat af, Isa isa, bool panels, Shape s,
               size_t rows, bool decode) {
  set_isa(isa);
  const auto w = bench::random_weights(wt, s.n_out, s.n_in);
  const size_t row_bytes = ggml_row_bytes(wt, s.n_in);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  const size_t stride = act_row_bytes(af, s.n_in);
  std::vector<uint8_t> act(stride * rows);
  std::vector<float> x(s.n_in);
  for (size_t r = 0; r < rows; ++r) {
    for (auto& v : x) v = nd(rng);
    quantize_activation_row(af, x.data(), s.n_in, act.data() + r * stride);
  }
  std::vector<float> y(rows * s.n_out);
  PanelMatrix pm;
  std::vector<ActBlockInfo> info;
  if (panels) {
    pm = pack_panels(wt, w.data(), row_bytes, s.n_in, s.n_out);
    if (af == ActFormat::q8_0) {  // K panels read the Q8_K rows alone
      info.resize(rows * s.n_in / 32);
      for (size_t r = 0; r < rows; ++r) {
        act_block_info(act.data() + r * stride, s.n_in, info.data() + r * s.n_in / 32);
      }
    }
  }
  for (auto _ : state) {
    if (panels) {
      matmul_panels(pm, act.data(), stride, info.data(), rows, y.data(), s.n_out, 0, s.n_out);
    } else {
      matmul(wt, w.data(), row_bytes, s.n_in, af, act.data(), stride, rows, y.data(), s.n_out, 0,
             s.n_out);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report(state, w.size(), s, rows, decode);
}

const char* af_name(ActFormat af) {
  return af == ActFormat::f32    ? "f32"
         : af == ActFormat::q8_0 ? "q8_0"
         : af == ActFormat::q8_1 ? "q8_1"
                                 : "q8_k";
}

int register_all() {
  // K-quants on AVX-512 on their panels only (their stored rows go to the AVX2 kernel there).
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,   GgmlType::BF16, GgmlType::Q8_0,
                            GgmlType::Q4_0, GgmlType::Q5_0,  GgmlType::Q4_1, GgmlType::Q5_1,
                            GgmlType::Q2_K, GgmlType::Q3_K,  GgmlType::Q4_K, GgmlType::Q5_K,
                            GgmlType::Q6_K, GgmlType::IQ4_XS};
  const Shape shapes[] = {{768, 2048}, {2048, 5632}};
  for (auto [isa, panels] :
       {std::pair{Isa::scalar, false}, std::pair{Isa::avx2, false}, std::pair{Isa::avx2, true},
        std::pair{Isa::avx512, false}, std::pair{Isa::avx512, true}}) {
    if (isa > best_isa()) continue;
    for (GgmlType t : types) {
      if (panels && !(t == GgmlType::F16 || t == GgmlType::BF16 || is_quantized(t))) continue;
      if (panels && isa == Isa::avx2 && !is_k_panel(t)) continue;  // AVX2 panels: K types only
      if (!panels && is_k_panel(t) && isa != Isa::avx2) continue;
      // The engine's default: integer paths for quantized weights. Q4_0 also with f32 activations.
      std::vector<ActFormat> afs = {act_format(t, true)};
      if (t == GgmlType::Q4_0 && !panels) afs.push_back(ActFormat::f32);
      for (ActFormat af : afs) {
        for (bool decode : {true, false}) {
          for (Shape s : shapes) {
            for (size_t rows : decode ? std::vector<size_t>{1, 4} : std::vector<size_t>{64, 512}) {
              if (!decode && isa == Isa::scalar && rows > 64) continue;  // minutes per run
              const std::string name =
                  bench_name(decode, t, af_name(af),
                             std::string(isa_name(isa)) + (panels ? "-panel" : ""), s, rows);
              benchmark::RegisterBenchmark(name.c_str(), bm_matmul, t, af, isa, panels, s, rows,
                                           decode)
                  ->Unit(benchmark::kMicrosecond)
                  ->UseRealTime();
            }
          }
        }
      }
    }
  }
  if (best_isa() >= Isa::amx) {
    // K-quant prompt rows on AMX-INT8 tiles (the panel entry point picks them).
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
      for (Shape s : shapes) {
        for (size_t rows : {64u, 512u}) {
          const std::string name = bench_name(false, t, "q8_k", "amx-panel", s, rows);
          benchmark::RegisterBenchmark(name.c_str(), bm_matmul, t, ActFormat::q8_k, Isa::amx, true,
                                       s, rows, false)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
    for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
      for (bool decode : {true, false}) {
        for (Shape s : shapes) {
          for (size_t rows : decode ? std::vector<size_t>{1, 4} : std::vector<size_t>{64, 512}) {
            const std::string name = bench_name(decode, t, "bf16x2", "amx-panel", s, rows);
            benchmark::RegisterBenchmark(name.c_str(), bm_matmul_amx, t, s, rows, decode)
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
          }
        }
      }
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace
}  // namespace lift::kernels
