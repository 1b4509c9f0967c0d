// Stored rows of random codes with sane f16 scales, for the kernel benchmarks (random bytes
// could make a scale inf or nan). Speed does not depend on the values.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/ggml_type.h"
#include "kernels/fp16.h"

namespace lift::bench {

inline std::vector<uint8_t> random_weights(GgmlType t, size_t n_out, size_t n_in) {
  std::mt19937 rng(1);
  const auto& info = ggml_type_info(t);
  std::vector<uint8_t> w(ggml_row_bytes(t, n_in) * n_out);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const size_t blocks = w.size() / info.block_bytes;
  for (size_t i = 0; i < blocks; ++i) {
    uint8_t* blk = w.data() + i * info.block_bytes;
    const float v = static_cast<float>(rng() % 1000) / 1000.0f - 0.5f;
    if (t == GgmlType::F32) {
      std::memcpy(blk, &v, 4);
      continue;
    }
    const uint16_t h =
        t == GgmlType::BF16 ? kernels::f32_to_bf16(v) : kernels::f32_to_f16(v * 0.02f);
    // Where the f16 scale(s) sit: first, except in Q6_K (last); Q4_K/Q5_K also have dmin.
    std::memcpy(blk + (t == GgmlType::Q6_K ? 208 : 0), &h, 2);
    if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K) {
      std::memcpy(blk + 2, &h, 2);
    }
  }
  return w;
}

}  // namespace lift::bench
