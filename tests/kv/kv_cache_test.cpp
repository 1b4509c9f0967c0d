// The cache's byte layout: what write() stores is found where KvLayerView says (K transposed
// within each block, V by slot), in either storage type, and copy_block moves whole blocks.
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fp16.h"

namespace lift {
namespace {

// Heads of 8 (narrow: V transposed, one run) or wider (a run per K/V head).
ModelConfig tiny_config(int head_dim) {
  ModelConfig cfg;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.n_kv_heads = 2;
  cfg.head_dim = head_dim;
  cfg.dim = 4 * head_dim;
  return cfg;
}

float read(const KvLayerView& view, const void* base, size_t at) {
  if (view.type == GgmlType::F32) return static_cast<const float*>(base)[at];
  return kernels::f16_to_f32(static_cast<const uint16_t*>(base)[at]);
}

TEST(KvCache, WrittenRowsAreWhereTheViewSays) {
  for (int head_dim : {8, 24}) {
    const ModelConfig cfg = tiny_config(head_dim);
    const size_t kv_dim = static_cast<size_t>(cfg.kv_dim());
    for (KvType type : {KvType::f32, KvType::f16}) {
      for (size_t bs : {1u, 5u, 16u}) {
        KvCache cache(cfg, 4, bs, type);
        std::mt19937 rng(7);
        std::uniform_int_distribution<int> small(-64, 64);  // exact in f16 after / 8
        std::vector<std::vector<float>> k(4 * bs), v(4 * bs);
        for (size_t s = 0; s < 4 * bs; ++s) {
          for (size_t e = 0; e < kv_dim; ++e) {
            k[s].push_back(static_cast<float>(small(rng)) / 8);
            v[s].push_back(static_cast<float>(small(rng)) / 8);
          }
          cache.write(1, s, k[s].data(), v[s].data());
        }
        const KvLayerView view = cache.layer_view(1);
        for (size_t s = 0; s < 4 * bs; ++s) {
          for (size_t e = 0; e < kv_dim; ++e) {
            ASSERT_EQ(read(view, view.k, view.k_index(s, e)), k[s][e]) << s << " " << e;
            ASSERT_EQ(read(view, view.v, view.v_index(s, e)), v[s][e]) << s << " " << e;
          }
        }
        // One head's K of a block is contiguous, dimension-major.
        EXPECT_EQ(view.k_index(2 * bs, 3), view.k_index(2 * bs, 0) + 3 * bs);
        EXPECT_EQ(view.k_index(2 * bs + bs - 1, 0), view.k_index(2 * bs, 0) + bs - 1);
        // A wide head's blocks follow each other in its own region, K's and V's alike.
        if (head_dim > 16) {
          const size_t hd = static_cast<size_t>(head_dim), h1 = hd;  // head 1's first dimension
          EXPECT_EQ(view.k_index(bs, h1), view.k_index(0, h1) + hd * bs);
          EXPECT_EQ(view.v_index(3 * bs, h1), view.v_index(2 * bs, h1) + hd * bs);
          EXPECT_EQ(view.k_index(0, h1), 4 * bs * hd);
          EXPECT_EQ(view.v_index(0, h1), 4 * bs * hd);
        }

        // Block 2 copied over block 0 carries every slot's K and V.
        cache.copy_block(2, 0);
        for (size_t j = 0; j < bs; ++j) {
          for (size_t e = 0; e < kv_dim; ++e) {
            ASSERT_EQ(read(view, view.k, view.k_index(j, e)), k[2 * bs + j][e]);
            ASSERT_EQ(read(view, view.v, view.v_index(j, e)), v[2 * bs + j][e]);
          }
        }
      }
    }
  }
}

// k_block and v_block (the ranges a forward pass names for prefetching) cover exactly where a
// block's slots keep their K and V in each run (head): every element of the run's dimensions
// of the block's slots inside, nothing else.
TEST(KvCache, BlockRangesHoldExactlyTheBlocksSlots) {
  for (int head_dim : {8, 24}) {
    const ModelConfig cfg = tiny_config(head_dim);
    const size_t kv_dim = static_cast<size_t>(cfg.kv_dim());
    for (KvType type : {KvType::f32, KvType::f16}) {
      for (size_t bs : {1u, 5u, 16u}) {
        const KvCache cache(cfg, 4, bs, type);
        const size_t elem = type == KvType::f16 ? 2 : 4;
        for (size_t layer = 0; layer < 2; ++layer) {
          const KvLayerView view = cache.layer_view(layer);
          const size_t run = kv_dim / cache.n_runs();
          for (size_t r = 0; r < cache.n_runs(); ++r) {
            for (int32_t block = 0; block < 4; ++block) {
              const MemRange k = cache.k_block(layer, block, r), v = cache.v_block(layer, block, r);
              ASSERT_EQ(k.bytes, bs * run * elem);
              ASSERT_EQ(v.bytes, bs * run * elem);
              const auto* k0 = static_cast<const uint8_t*>(view.k);
              const auto* v0 = static_cast<const uint8_t*>(view.v);
              size_t lo_k = SIZE_MAX, hi_k = 0, lo_v = SIZE_MAX, hi_v = 0;
              for (size_t s = static_cast<size_t>(block) * bs;
                   s < static_cast<size_t>(block + 1) * bs; ++s) {
                for (size_t e = r * run; e < (r + 1) * run; ++e) {
                  lo_k = std::min(lo_k, view.k_index(s, e) * elem);
                  hi_k = std::max(hi_k, (view.k_index(s, e) + 1) * elem);
                  lo_v = std::min(lo_v, view.v_index(s, e) * elem);
                  hi_v = std::max(hi_v, (view.v_index(s, e) + 1) * elem);
                }
              }
              EXPECT_EQ(static_cast<const uint8_t*>(k.p), k0 + lo_k) << layer << " " << block;
              EXPECT_EQ(static_cast<const uint8_t*>(k.p) + k.bytes, k0 + hi_k);
              EXPECT_EQ(static_cast<const uint8_t*>(v.p), v0 + lo_v) << layer << " " << block;
              EXPECT_EQ(static_cast<const uint8_t*>(v.p) + v.bytes, v0 + hi_v);
            }
          }
        }
      }
    }
  }
}

// A tensor-parallel rank may hold no K/V head at all (one K/V head, two ranks): its cache has
// no runs and no bytes, and naming or copying its blocks does nothing.
TEST(KvCache, ARankWithoutHeadsHoldsNoRuns) {
  for (int head_dim : {8, 24}) {
    ModelConfig cfg = tiny_config(head_dim);
    cfg.n_kv_heads = 1;
    KvCache cache(cfg, 4, 16, KvType::f32, TpShard{0, 2});
    EXPECT_EQ(cache.kv_dim(), 0u);
    EXPECT_EQ(cache.n_runs(), 0u);
    EXPECT_EQ(cache.total_bytes(), 0u);
    cache.copy_block(1, 2);
    const KvCache rank1(cfg, 4, 16, KvType::f32, TpShard{1, 2});  // the one head
    EXPECT_EQ(rank1.n_runs(), 1u);
  }
}

}  // namespace
}  // namespace lift
