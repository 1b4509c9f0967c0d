// One layer's paged K/V filled with normal random values, held in both storage types, for the
// attention tests and benchmarks. The buffers hold exactly n_blocks blocks, so AddressSanitizer
// sees a read past the last one.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/fp16.h"

namespace lift::kernels {

struct RandomKvPool {
  GgmlType type;
  size_t kv_dim, block_size, n_blocks;
  bool v_transposed;
  size_t v_run;  // KvLayerView::v_run
  std::vector<float> k32, v32;
  std::vector<uint16_t> k16, v16;

  // head_dim: the layout a KV cache uses for heads of that size (0: V by slot).
  RandomKvPool(GgmlType t, size_t dim, size_t bs, size_t nb, uint32_t seed, size_t head_dim = 0)
      : type(t),
        kv_dim(dim),
        block_size(bs),
        n_blocks(nb),
        v_transposed(head_dim > 0 && v_transposed_for(head_dim)),
        v_run(v_transposed ? 0 : head_dim) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    const size_t n = dim * bs * nb;
    // Sized, not grown: capacity beyond the size would hide an overrun from ASan.
    k32.resize(n);
    v32.resize(n);
    k16.resize(n);
    v16.resize(n);
    for (auto& x : k32) x = d(rng);
    for (auto& x : v32) x = d(rng);
    for (size_t i = 0; i < n; ++i) {
      k16[i] = f32_to_f16(k32[i]);
      v16[i] = f32_to_f16(v32[i]);
    }
  }
  // Dimensions per run (a head's region, KvLayerView::head_stride), as a KV cache keeps them.
  size_t run() const { return v_run == 0 ? kv_dim : v_run; }
  KvLayerView view() const {
    const size_t stride = n_blocks * block_size * run();
    if (type == GgmlType::F16) {
      return {type, k16.data(), v16.data(), kv_dim, block_size, v_transposed, v_run, stride};
    }
    return {type, k32.data(), v32.data(), kv_dim, block_size, v_transposed, v_run, stride};
  }
  // Sets element e (< kv_dim) of slot s's K in both storage types (F16 rounded to nearest).
  void set_k(size_t s, size_t e, float x) {
    const size_t i = view().k_index(s, e);
    k32[i] = x;
    k16[i] = f32_to_f16(x);
  }
  // Element e of slot s's K as the view's type stores it, widened.
  float k_at(size_t s, size_t e) const {
    const size_t i = view().k_index(s, e);
    return type == GgmlType::F16 ? f16_to_f32(k16[i]) : k32[i];
  }
  // Moves block `from` to `to` (contents copied), for placement tests.
  void copy_block(size_t from, size_t to) {
    const size_t n = run() * block_size;
    for (size_t r = 0; r < kv_dim / run(); ++r) {
      const size_t s = (r * n_blocks + from) * n, d = (r * n_blocks + to) * n;
      std::memcpy(&k32[d], &k32[s], n * 4);
      std::memcpy(&v32[d], &v32[s], n * 4);
      std::memcpy(&k16[d], &k16[s], n * 2);
      std::memcpy(&v16[d], &v16[s], n * 2);
    }
  }
};

}  // namespace lift::kernels
