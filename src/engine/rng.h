// Counter-based random numbers for sampling: every draw is a pure function of
// (seed, stream, counter), so a request reproduces the same tokens whatever else runs
// beside it, after preemption and recompute, and for each parallel sample on its own.
// The sampler uses stream = sample index (sample #i of n) and counter = output position.
#pragma once

#include <cstdint>

namespace lift {

// The splitmix64 output function: a bijection on 64-bit words with good avalanche.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// 64 random bits for (seed, stream, counter). Each stage is one splitmix64 step (Weyl
// increment, then mix), keyed by the previous stage, so for a fixed (seed, stream) the
// counters walk a splitmix64 sequence and distinct counters never collide.
constexpr uint64_t counter_hash(uint64_t seed, uint64_t stream, uint64_t counter) {
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  uint64_t h = mix64(seed + kGolden);
  h = mix64(h + (stream + 1) * kGolden);
  h = mix64(h + (counter + 1) * kGolden);
  return h;
}

// A uniform double in [0, 1) with 53 random bits.
constexpr double counter_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  return static_cast<double>(counter_hash(seed, stream, counter) >> 11) * 0x1.0p-53;
}

// Speculative decoding draws independent uniforms at each (sample, position): the draft's own
// choice, the accept test and the residual draw after a rejection.
enum class SpecDraw : uint64_t { draft = 1, accept = 2, residual = 3 };
constexpr double spec_uniform(uint64_t seed, SpecDraw which, uint64_t stream, uint64_t counter) {
  return counter_uniform(mix64(seed ^ (static_cast<uint64_t>(which) * 0xd1b54a32d192ed03ULL)),
                         stream, counter);
}

}  // namespace lift
