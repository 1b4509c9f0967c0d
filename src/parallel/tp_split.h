// Which part of the model a tensor-parallel rank computes and holds: whole 16-row panels of
// every product's output rows, whole K/V heads of the cache. Shared by the loader (which packs
// only a rank's rows), the K/V cache (which stores only its heads) and the backend.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/panel.h"
#include "model/model_config.h"

namespace lift {

struct TpShard {
  int rank = 0, size = 1;
  bool whole() const { return size <= 1; }
};

// [begin, end) of n items that `rank` of `size` takes, in whole units, as evenly as they go.
inline std::pair<size_t, size_t> tp_share(size_t n, int rank, int size,
                                          size_t unit = kernels::kPanelRows) {
  const size_t units = (n + unit - 1) / unit;
  const auto r = static_cast<size_t>(rank), s = static_cast<size_t>(size);
  return {std::min(n, units * r / s * unit), std::min(n, units * (r + 1) / s * unit)};
}

// The K/V elements of a token a rank's cache holds: its whole K/V heads, {first, width}.
inline std::pair<size_t, size_t> tp_kv_part(const ModelConfig& cfg, TpShard shard) {
  const auto hd = static_cast<size_t>(cfg.head_dim);
  const auto [g0, g1] = tp_share(static_cast<size_t>(cfg.n_kv_heads), shard.rank, shard.size, 1);
  return {g0 * hd, (g1 - g0) * hd};
}

}  // namespace lift
