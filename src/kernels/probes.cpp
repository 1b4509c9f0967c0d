#include "kernels/probes.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "kernels/isa.h"
#include "util/large_alloc.h"
#include "util/thread_pool.h"

namespace lift {

namespace probes {
float sum_avx512(const float* p, size_t n);
float fma_avx512(int64_t iters);
int32_t vnni_avx512(int64_t iters);
float sum_avx2(const float* p, size_t n);
float fma_avx2(int64_t iters);
int32_t maddubs_avx2(int64_t iters);
}  // namespace probes

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Keeps results alive so the compiler cannot drop the measured loops.
volatile float g_sink_f = 0;
volatile int32_t g_sink_i = 0;

float sum_scalar(const float* p, size_t n) {
  float a[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) a[k] += p[i + k];
  }
  return a[0] + a[7];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, size_t bytes)
    : pool_(pool), n_(bytes / sizeof(float) / 64 * 64) {
  // Allocated as the packed weights are (huge pages where available), so the bound is the
  // machine's best stream, not a handicapped one.
  buf_ = static_cast<float*>(alloc_streamed(n_ * sizeof(float)));
  const size_t threads = static_cast<size_t>(pool_.size());
  // Touch every page from its reading thread first.
  pool_.parallel_for(threads, [&](size_t t, int) {
    const size_t b = n_ / threads * t / 64 * 64,
                 e = t + 1 == threads ? n_ : n_ / threads * (t + 1) / 64 * 64;
    std::fill(buf_ + b, buf_ + e, 1.0f);
  });
}

ReadBandwidthProbe::~ReadBandwidthProbe() { free_streamed(buf_); }

double ReadBandwidthProbe::measure(int passes) {
  const size_t threads = static_cast<size_t>(pool_.size());
  const kernels::Isa isa = kernels::active_isa();
  std::vector<double> rates;
  for (int pass = 0; pass <= passes; ++pass) {
    const auto t0 = Clock::now();
    pool_.parallel_for(threads, [&](size_t t, int) {
      const size_t b = n_ / threads * t / 64 * 64,
                   e = t + 1 == threads ? n_ : n_ / threads * (t + 1) / 64 * 64;
      float s;
      if (isa >= kernels::Isa::avx512)
        s = probes::sum_avx512(buf_ + b, e - b);
      else if (isa == kernels::Isa::avx2)
        s = probes::sum_avx2(buf_ + b, e - b);
      else
        s = sum_scalar(buf_ + b, e - b);
      g_sink_f = g_sink_f + s;
    });
    if (pass > 0)
      rates.push_back(static_cast<double>(n_ * sizeof(float)) / secs(Clock::now() - t0) / 1e9);
  }
  return median(rates);
}

double probe_read_bandwidth(ThreadPool& pool, size_t bytes, int passes) {
  return ReadBandwidthProbe(pool, bytes).measure(passes);
}

double probe_fp32_fma(ThreadPool& pool) {
  const kernels::Isa isa = kernels::active_isa();
  if (isa == kernels::Isa::scalar) return 0;
  const int64_t iters = 20'000'000;
  const double lanes = isa >= kernels::Isa::avx512 ? 16 : 8;
  std::vector<double> rates;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    pool.parallel_for(static_cast<size_t>(pool.size()), [&](size_t, int) {
      g_sink_f = g_sink_f + (isa >= kernels::Isa::avx512 ? probes::fma_avx512(iters)
                                                         : probes::fma_avx2(iters));
    });
    const double flops = static_cast<double>(iters) * 10 * lanes * 2 * pool.size();
    rates.push_back(flops / secs(Clock::now() - t0) / 1e9);
  }
  return median(rates);
}

double probe_int8_dot(ThreadPool& pool) {
  const kernels::Isa isa = kernels::active_isa();
  if (isa == kernels::Isa::scalar) return 0;
  const bool vnni = isa >= kernels::Isa::avx512;
  const int64_t iters = 20'000'000;
  std::vector<double> rates;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    pool.parallel_for(static_cast<size_t>(pool.size()), [&](size_t, int) {
      g_sink_i = g_sink_i + (vnni ? probes::vnni_avx512(iters) : probes::maddubs_avx2(iters));
    });
    // A 512-bit dpbusd does 64 int8 multiply-adds (128 ops); AVX2's maddubs + madd + add does 32.
    const double ops = static_cast<double>(iters) * 10 * (vnni ? 128 : 64) * pool.size();
    rates.push_back(ops / secs(Clock::now() - t0) / 1e9);
  }
  return median(rates);
}

MachineProbe probe_machine(ThreadPool& pool, size_t bandwidth_bytes) {
  MachineProbe m;
  m.read_gbps = probe_read_bandwidth(pool, bandwidth_bytes);
  m.fp32_gflops = probe_fp32_fma(pool);
  m.int8_gops = probe_int8_dot(pool);
  return m;
}

}  // namespace lift
