// Measurements of the machine itself, taken in the same run as a benchmark so its results can
// be stated as fractions of what the hardware can do: memory read bandwidth, FP32 FMA peak,
// int8 dot-product peak (VNNI, else AVX2 maddubs).
#pragma once

#include <cstddef>

namespace lift {

class ThreadPool;

struct MachineProbe {
  double read_gbps = 0;    // GB/s reading a buffer far larger than the caches
  double fp32_gflops = 0;  // FMA throughput, all threads
  double int8_gops = 0;    // int8 multiply-add throughput (VNNI, else AVX2 maddubs), all threads
};

// Each thread sums its share of a `bytes` buffer with the widest loads available; one warm-up
// pass and `passes` timed passes, median reported.
double probe_read_bandwidth(ThreadPool& pool, size_t bytes = size_t{1} << 30, int passes = 5);

// The same probe on a buffer allocated (and its pages touched) once, to be measured again and
// again beside each repetition of a benchmark: on a shared machine the bandwidth moves within
// a run (25-54 GB/s within an hour on 2 Zen 4 cores), so a bound taken once is a poor yardstick.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(ThreadPool& pool, size_t bytes);
  ~ReadBandwidthProbe();
  ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
  ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;
  // GB/s: one warm-up pass, median of `passes` timed ones.
  double measure(int passes);

 private:
  ThreadPool& pool_;
  float* buf_;
  size_t n_;
};
double probe_fp32_fma(ThreadPool& pool);
double probe_int8_dot(ThreadPool& pool);
MachineProbe probe_machine(ThreadPool& pool, size_t bandwidth_bytes = size_t{1} << 30);

}  // namespace lift
