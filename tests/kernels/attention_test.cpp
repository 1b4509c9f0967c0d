// Paged attention against its double-precision oracle on identical cache contents (F32 and
// F16 K/V), and bitwise independence from where a sequence's blocks sit in the pool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/fp16.h"
#include "kernels/ops.h"

namespace lift::kernels {
namespace {

struct Pool {
  GgmlType type;
  size_t kv_dim, block_size, n_blocks;
  std::vector<float> k32, v32;
  std::vector<uint16_t> k16, v16;

  Pool(GgmlType t, size_t dim, size_t bs, size_t nb, uint32_t seed)
      : type(t), kv_dim(dim), block_size(bs), n_blocks(nb) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    const size_t n = dim * bs * nb;
    k32.resize(n);
    v32.resize(n);
    for (auto& x : k32) x = d(rng);
    for (auto& x : v32) x = d(rng);
    for (float x : k32) k16.push_back(f32_to_f16(x));
    for (float x : v32) v16.push_back(f32_to_f16(x));
  }
  KvLayerView view() const {
    if (type == GgmlType::F16) return {type, k16.data(), v16.data(), kv_dim, block_size};
    return {type, k32.data(), v32.data(), kv_dim, block_size};
  }
  // Moves block `from` to `to` (contents copied), for placement tests.
  void copy_block(size_t from, size_t to) {
    const size_t n = kv_dim * block_size;
    std::memcpy(&k32[to * n], &k32[from * n], n * 4);
    std::memcpy(&v32[to * n], &v32[from * n], n * 4);
    std::memcpy(&k16[to * n], &k16[from * n], n * 2);
    std::memcpy(&v16[to * n], &v16[from * n], n * 2);
  }
};

class Attention : public ::testing::TestWithParam<GgmlType> {};

TEST_P(Attention, MatchesReferenceWithinTolerance) {
  for (size_t head_dim : {8u, 64u, 72u, 128u}) {
    for (int32_t n_ctx : {1, 15, 16, 17, 100, 300}) {
      const size_t bs = 16, n_kv_heads = 2;
      Pool pool(GetParam(), head_dim * n_kv_heads, bs, 24, 11);
      std::vector<int32_t> table(24);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 7) % 24);
      std::mt19937 rng(5);
      std::normal_distribution<float> d(0.0f, 1.0f);
      std::vector<float> q(head_dim), out(head_dim), ref(head_dim), scratch(attention_scratch_floats(bs, head_dim));
      for (auto& x : q) x = d(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      attend_head(q.data(), pool.view(), head_dim, head_dim, table.data(), n_ctx, scale,
                  scratch.data(), out.data());
      attend_head_reference(q.data(), pool.view(), head_dim, head_dim, table.data(), n_ctx, scale,
                            ref.data());
      float mx = 0, worst = 0;
      for (size_t i = 0; i < head_dim; ++i) {
        mx = std::max(mx, std::abs(ref[i]));
        worst = std::max(worst, std::abs(out[i] - ref[i]));
      }
      EXPECT_LE(worst, 1e-4f * std::max(1.0f, mx)) << "head_dim " << head_dim << " n_ctx " << n_ctx;
    }
  }
}

TEST_P(Attention, BlockPlacementDoesNotChangeBits) {
  const size_t head_dim = 64, bs = 16;
  Pool pool(GetParam(), head_dim, bs, 16, 3);
  std::vector<int32_t> a = {0, 1, 2, 3};
  std::vector<int32_t> b = {9, 12, 4, 15};
  for (size_t i = 0; i < a.size(); ++i) {
    pool.copy_block(static_cast<size_t>(a[i]), static_cast<size_t>(b[i]));
  }
  std::vector<float> q(head_dim, 0.25f), oa(head_dim), ob(head_dim),
      scratch(attention_scratch_floats(bs, head_dim));
  attend_head(q.data(), pool.view(), 0, head_dim, a.data(), 61, 0.125f, scratch.data(), oa.data());
  attend_head(q.data(), pool.view(), 0, head_dim, b.data(), 61, 0.125f, scratch.data(), ob.data());
  EXPECT_EQ(std::memcmp(oa.data(), ob.data(), head_dim * sizeof(float)), 0);
}

TEST_P(Attention, TileOfQueriesEqualsEachAloneBitwise) {
  const size_t head_dim = 64, bs = 16;
  Pool pool(GetParam(), head_dim * 2, bs, 8, 21);
  std::vector<int32_t> table = {5, 2, 7, 0, 1, 3, 4, 6};
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const size_t n_q = kAttentionTile;
  std::vector<std::vector<float>> q(n_q, std::vector<float>(head_dim)), tiled(n_q), alone(n_q);
  std::vector<const float*> qp;
  std::vector<float*> op;
  std::vector<int32_t> n_ctx;
  for (size_t i = 0; i < n_q; ++i) {
    for (auto& x : q[i]) x = d(rng);
    tiled[i].resize(head_dim);
    alone[i].resize(head_dim);
    qp.push_back(q[i].data());
    op.push_back(tiled[i].data());
    n_ctx.push_back(static_cast<int32_t>(90 + i));  // a prompt chunk crossing block borders
  }
  std::vector<float> scratch(attention_scratch_floats(bs, head_dim));
  attend_tile(qp.data(), n_q, pool.view(), head_dim, head_dim, table.data(), n_ctx.data(), 0.125f,
              scratch.data(), op.data());
  for (size_t i = 0; i < n_q; ++i) {
    attend_head(q[i].data(), pool.view(), head_dim, head_dim, table.data(), n_ctx[i], 0.125f,
                scratch.data(), alone[i].data());
    EXPECT_EQ(std::memcmp(tiled[i].data(), alone[i].data(), head_dim * sizeof(float)), 0) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, Attention, ::testing::Values(GgmlType::F32, GgmlType::F16));

}  // namespace
}  // namespace lift::kernels
