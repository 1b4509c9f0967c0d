// Paged attention against its double-precision oracle on identical cache contents (F32 and
// F16 K/V), bitwise independence from where a sequence's blocks sit in the pool and from which
// queries share a tile, the same bits for every Isa; and the accuracy of its exp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/isa.h"
#include "kernels/ops.h"
#include "kernels/random_kv.h"

namespace lift::kernels {
namespace {

using testing::IsaGuard;
using testing::supported_isas;

// Distance in representable floats between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  return std::abs(static_cast<int64_t>(std::bit_cast<int32_t>(a)) - std::bit_cast<int32_t>(b));
}

std::vector<float> exp_of(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  softmax_exp(x.data(), x.size(), y.data());
  return y;
}

// Every 101st float of [-87.33, 88.72] (some 22 million, with both ends), against exp in double
// rounded to float. (Over every float of the range the largest error is also 1 ulp.)
TEST(SoftmaxExp, WithinOneUlpOfExp) {
  IsaGuard guard;
  set_isa(Isa::scalar);
  std::vector<float> x;
  for (uint32_t b = std::bit_cast<uint32_t>(-87.33f); b > 0x80000000u; b -= 101) {
    x.push_back(std::bit_cast<float>(b));
  }
  for (uint32_t b = 0; b < std::bit_cast<uint32_t>(88.72f); b += 101) {
    x.push_back(std::bit_cast<float>(b));
  }
  x.push_back(-0.0f);
  x.push_back(88.72f);
  const std::vector<float> y = exp_of(x);
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t d = ulps(y[i], static_cast<float>(std::exp(static_cast<double>(x[i]))));
    if (d > worst) {
      worst = d;
      worst_x = x[i];
    }
  }
  EXPECT_LE(worst, 1) << "at x = " << worst_x;
}

TEST(SoftmaxExp, SpecialValues) {
  IsaGuard guard;
  const float inf = std::numeric_limits<float>::infinity();
  // Below the normal range +0, so that exp(-inf) (the first block's correction) is 0.
  const std::vector<float> zero = {-inf, -1e30f, -100.0f, -87.34f};
  const std::vector<float> one = {-0.0f, 0.0f};
  const std::vector<float> overflow = {88.73f, 100.0f, inf};
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    for (float y : exp_of(zero)) EXPECT_EQ(std::bit_cast<uint32_t>(y), 0u);
    for (float y : exp_of(one)) EXPECT_EQ(y, 1.0f);
    for (float y : exp_of(overflow)) EXPECT_EQ(y, inf);
    EXPECT_TRUE(std::isnan(exp_of({std::numeric_limits<float>::quiet_NaN()})[0]));
  }
}

// Vector lanes, any count (masked and scalar tails), give the scalar bits.
TEST(SoftmaxExp, EveryIsaGivesTheSameBits) {
  IsaGuard guard;
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f);
  std::uniform_real_distribution<float> near(-1.0f, 1.0f);
  std::vector<float> x;
  for (int i = 0; i < 20000; ++i) x.push_back(i % 2 ? wide(rng) : near(rng));
  // The cut-offs and their neighbours.
  for (float v : {-87.33f, 88.72f}) {
    x.push_back(v);
    x.push_back(std::nextafter(v, -INFINITY));
    x.push_back(std::nextafter(v, INFINITY));
  }
  set_isa(Isa::scalar);
  const std::vector<float> want = exp_of(x);
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    for (size_t n : {x.size(), size_t{1}, size_t{7}, size_t{15}, size_t{17}, size_t{33}}) {
      std::vector<float> y(n);
      softmax_exp(x.data(), n, y.data());
      EXPECT_EQ(std::memcmp(y.data(), want.data(), n * sizeof(float)), 0)
          << isa_name(isa) << " n " << n;
    }
  }
}

class Attention : public ::testing::TestWithParam<GgmlType> {};

TEST_P(Attention, MatchesReferenceWithinTolerance) {
  for (size_t head_dim : {8u, 64u, 72u, 128u}) {
    for (int32_t n_ctx : {1, 15, 16, 17, 100, 300}) {
      const size_t bs = 16, n_kv_heads = 2;
      RandomKvPool pool(GetParam(), head_dim * n_kv_heads, bs, 24, 11);
      std::vector<int32_t> table(24);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 7) % 24);
      std::mt19937 rng(5);
      std::normal_distribution<float> d(0.0f, 1.0f);
      std::vector<float> q(head_dim), out(head_dim), ref(head_dim),
          scratch(attention_scratch_floats(bs, head_dim));
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
  RandomKvPool pool(GetParam(), head_dim, bs, 16, 3);
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
  RandomKvPool pool(GetParam(), head_dim * 2, bs, 8, 21);
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

// Tiles of every size 1..16 with arbitrary context lengths (queries ending in the middle of a
// block, past the others' last block, sharing a length), block sizes from 1 to above 64, and
// head sizes off the vector width: each query as alone, and every Isa giving the same bits
// as the scalar code.
TEST_P(Attention, AnyTileAnyIsaSameBits) {
  IsaGuard guard;
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (size_t bs : {1u, 5u, 8u, 16u, 17u, 32u, 48u, 64u, 80u}) {
    for (size_t head_dim : {8u, 64u, 72u, 128u}) {
      for (size_t n_q = 1; n_q <= kAttentionTile; ++n_q) {
        const size_t n_blocks = 160 / bs + 1;
        RandomKvPool pool(GetParam(), head_dim * 2, bs, n_blocks,
                          static_cast<uint32_t>(bs + head_dim));
        std::vector<int32_t> table(n_blocks);
        for (size_t i = 0; i < n_blocks; ++i) table[i] = static_cast<int32_t>((i * 5) % n_blocks);
        std::uniform_int_distribution<int32_t> ctx(1, 160);
        std::vector<std::vector<float>> q(n_q, std::vector<float>(head_dim));
        std::vector<const float*> qp;
        std::vector<int32_t> n_ctx;
        for (size_t i = 0; i < n_q; ++i) {
          for (auto& x : q[i]) x = d(rng);
          qp.push_back(q[i].data());
          n_ctx.push_back(i > 0 && i % 5 == 0 ? n_ctx[i - 1] : ctx(rng));
        }
        std::vector<float> scratch(attention_scratch_floats(bs, head_dim));
        auto run_tile = [&] {
          std::vector<std::vector<float>> out(n_q, std::vector<float>(head_dim));
          std::vector<float*> op;
          for (auto& o : out) op.push_back(o.data());
          attend_tile(qp.data(), n_q, pool.view(), head_dim, head_dim, table.data(), n_ctx.data(),
                      0.125f, scratch.data(), op.data());
          return out;
        };
        set_isa(Isa::scalar);
        const auto want = run_tile();
        for (Isa isa : supported_isas()) {
          set_isa(isa);
          SCOPED_TRACE(::testing::Message() << isa_name(isa) << " bs " << bs << " head_dim "
                                            << head_dim << " n_q " << n_q);
          const auto tiled = run_tile();
          for (size_t i = 0; i < n_q; ++i) {
            std::vector<float> alone(head_dim), ref(head_dim);
            attend_head(q[i].data(), pool.view(), head_dim, head_dim, table.data(), n_ctx[i],
                        0.125f, scratch.data(), alone.data());
            EXPECT_EQ(std::memcmp(tiled[i].data(), want[i].data(), head_dim * sizeof(float)), 0)
                << i;
            EXPECT_EQ(std::memcmp(tiled[i].data(), alone.data(), head_dim * sizeof(float)), 0) << i;
            attend_head_reference(q[i].data(), pool.view(), head_dim, head_dim, table.data(),
                                  n_ctx[i], 0.125f, ref.data());
            for (size_t e = 0; e < head_dim; ++e) {
              EXPECT_NEAR(tiled[i][e], ref[e], 1e-4f * std::max(1.0f, std::abs(ref[e]))) << i;
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, Attention, ::testing::Values(GgmlType::F32, GgmlType::F16));

}  // namespace
}  // namespace lift::kernels
