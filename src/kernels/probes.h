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
double probe_fp32_fma(ThreadPool& pool);
double probe_int8_dot(ThreadPool& pool);
MachineProbe probe_machine(ThreadPool& pool, size_t bandwidth_bytes = size_t{1} << 30);

}  // namespace lift
