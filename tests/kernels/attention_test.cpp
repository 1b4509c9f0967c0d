// Paged attention against its double-precision oracle on identical cache contents (F32 and
// F16 K/V), bitwise independence from where a sequence's blocks sit in the pool and from which
// queries share a tile, the same bits for every Isa, scores in the hundreds that move the
// running maximum up and down across blocks; and the accuracy of its exp. Outputs start as
// the unwritten sentinel (a NaN), which fails every comparison.
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

using testing::is_unwritten;
using testing::IsaGuard;
using testing::same_bits;
using testing::supported_isas;
using testing::unwritten_floats;
using testing::within_tolerance;

// Distance in representable floats between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  return std::abs(static_cast<int64_t>(std::bit_cast<int32_t>(a)) - std::bit_cast<int32_t>(b));
}

std::vector<float> exp_of(const std::vector<float>& x) {
  std::vector<float> y = unwritten_floats(x.size());
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
    // Exactly 1: attend_tile skips the correction of a block whose maxima do not move.
    for (float y : exp_of(one)) EXPECT_EQ(y, 1.0f);
    for (float y : exp_of(overflow)) EXPECT_EQ(y, inf);
    const float nan_out = exp_of({std::numeric_limits<float>::quiet_NaN()})[0];
    EXPECT_TRUE(std::isnan(nan_out));
    EXPECT_FALSE(is_unwritten(nan_out));
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
      std::vector<float> y = unwritten_floats(n);
      softmax_exp(x.data(), n, y.data());
      EXPECT_TRUE(same_bits(y.data(), want.data(), n)) << isa_name(isa) << " n " << n;
    }
  }
}

class Attention : public ::testing::TestWithParam<GgmlType> {};

TEST_P(Attention, MatchesReferenceWithinTolerance) {
  for (size_t head_dim : {4u, 8u, 12u, 16u, 64u, 72u, 128u}) {
    for (int32_t n_ctx : {1, 15, 16, 17, 100, 300}) {
      const size_t bs = 16, n_kv_heads = 2;
      RandomKvPool pool(GetParam(), head_dim * n_kv_heads, bs, 24, 11, head_dim);
      std::vector<int32_t> table(24);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 7) % 24);
      std::mt19937 rng(5);
      std::normal_distribution<float> d(0.0f, 1.0f);
      std::vector<float> q(head_dim), out = unwritten_floats(head_dim),
                                      ref = unwritten_floats(head_dim),
                                      scratch(attention_scratch_floats(bs, head_dim));
      for (auto& x : q) x = d(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      attend_head(q.data(), pool.view(), head_dim, head_dim, table.data(), n_ctx, scale,
                  scratch.data(), out.data());
      attend_head_reference(q.data(), pool.view(), head_dim, head_dim, table.data(), n_ctx, scale,
                            ref.data());
      EXPECT_TRUE(within_tolerance(out, ref)) << "head_dim " << head_dim << " n_ctx " << n_ctx;
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
  std::vector<float> q(head_dim, 0.25f), oa = unwritten_floats(head_dim),
                                         ob = unwritten_floats(head_dim),
                                         scratch(attention_scratch_floats(bs, head_dim));
  attend_head(q.data(), pool.view(), 0, head_dim, a.data(), 61, 0.125f, scratch.data(), oa.data());
  attend_head(q.data(), pool.view(), 0, head_dim, b.data(), 61, 0.125f, scratch.data(), ob.data());
  EXPECT_TRUE(same_bits(oa, ob));
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
    tiled[i] = unwritten_floats(head_dim);
    alone[i] = unwritten_floats(head_dim);
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
    EXPECT_TRUE(same_bits(tiled[i], alone[i])) << i;
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
    for (size_t head_dim : {3u, 8u, 16u, 64u, 72u, 128u}) {
      for (size_t n_q = 1; n_q <= kAttentionTile; ++n_q) {
        const size_t n_blocks = 160 / bs + 1;
        RandomKvPool pool(GetParam(), head_dim * 2, bs, n_blocks,
                          static_cast<uint32_t>(bs + head_dim), head_dim);
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
          std::vector<std::vector<float>> out(n_q, unwritten_floats(head_dim));
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
            std::vector<float> alone = unwritten_floats(head_dim), ref = unwritten_floats(head_dim);
            attend_head(q[i].data(), pool.view(), head_dim, head_dim, table.data(), n_ctx[i],
                        0.125f, scratch.data(), alone.data());
            EXPECT_TRUE(same_bits(tiled[i], want[i])) << i;
            EXPECT_TRUE(same_bits(tiled[i], alone)) << i;
            attend_head_reference(q[i].data(), pool.view(), head_dim, head_dim, table.data(),
                                  n_ctx[i], 0.125f, ref.data());
            const auto close = within_tolerance(tiled[i], ref);
            EXPECT_TRUE(close) << i;
            // Element by element too, stricter than the per-row contract (once the row is
            // finite and close, so that a failure above does not repeat head_dim times).
            for (size_t e = 0; close && e < head_dim; ++e) {
              EXPECT_NEAR(tiled[i][e], ref[e], 1e-4f * std::max(1.0f, std::abs(ref[e]))) << i;
            }
          }
        }
      }
    }
  }
}

// Sliding windows and soft-capping: tiles of consecutive positions (a prompt chunk) whose
// windows start mid-block, on every Isa, bitwise each query alone, close to the oracle; and the
// blocks wholly before every window are never read: their table entries are -1 (released), so
// any read would be out of bounds (ASan) or garbage.
TEST_P(Attention, SlidingWindowAndSoftcapSkipReleasedBlocks) {
  IsaGuard guard;
  std::mt19937 rng(31);
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (size_t bs : {1u, 4u, 16u, 17u}) {
    for (int32_t window : {1, 5, 16, 20, 33}) {
      for (float softcap : {0.0f, 3.0f}) {
        for (size_t head_dim : {8u, 40u}) {
          const size_t n_blocks = 120 / bs + 1;
          RandomKvPool pool(GetParam(), head_dim, bs, n_blocks, static_cast<uint32_t>(bs * 7),
                            head_dim);
          const size_t n_q = kAttentionTile;
          const int32_t first = 100;  // the tile's queries sit at positions 99 .. 114
          std::vector<int32_t> table(n_blocks), n_ctx(n_q);
          for (size_t i = 0; i < n_blocks; ++i) table[i] = static_cast<int32_t>((i * 7) % n_blocks);
          for (size_t i = 0; i < n_q; ++i) n_ctx[i] = first + static_cast<int32_t>(i);
          // Blocks before the earliest window: released.
          const size_t lo = static_cast<size_t>(std::max(0, first - window));
          for (size_t b = 0; b < lo / bs; ++b) table[b] = -1;
          std::vector<std::vector<float>> q(n_q, std::vector<float>(head_dim));
          std::vector<const float*> qp;
          for (auto& v : q) {
            for (auto& x : v) x = d(rng);
            qp.push_back(v.data());
          }
          const AttendMods mods{softcap, window};
          std::vector<float> scratch(attention_scratch_floats(bs, head_dim));
          auto run_tile = [&] {
            std::vector<std::vector<float>> out(n_q, unwritten_floats(head_dim));
            std::vector<float*> op;
            for (auto& o : out) op.push_back(o.data());
            attend_tile(qp.data(), n_q, pool.view(), 0, head_dim, table.data(), n_ctx.data(), 0.3f,
                        scratch.data(), op.data(), mods);
            return out;
          };
          set_isa(Isa::scalar);
          const auto want = run_tile();
          for (Isa isa : supported_isas()) {
            set_isa(isa);
            SCOPED_TRACE(::testing::Message()
                         << isa_name(isa) << " bs " << bs << " window " << window << " softcap "
                         << softcap << " head_dim " << head_dim);
            const auto tiled = run_tile();
            for (size_t i = 0; i < n_q; ++i) {
              std::vector<float> alone = unwritten_floats(head_dim),
                                 ref = unwritten_floats(head_dim);
              attend_head(q[i].data(), pool.view(), 0, head_dim, table.data(), n_ctx[i], 0.3f,
                          scratch.data(), alone.data(), mods);
              EXPECT_TRUE(same_bits(tiled[i], want[i])) << i;
              EXPECT_TRUE(same_bits(tiled[i], alone)) << i;
              attend_head_reference(q[i].data(), pool.view(), 0, head_dim, table.data(), n_ctx[i],
                                    0.3f, ref.data(), mods);
              EXPECT_TRUE(within_tolerance(tiled[i], ref)) << i;
            }
          }
        }
      }
    }
  }
}

// The oracle's window and soft-capping are what they say: a window of w over a context of n is
// full attention over the last w positions (the same K/V seen from a shifted table), and
// soft-capping with a cap far above the scores changes nothing measurable while a small cap
// does.
TEST_P(Attention, WindowAndSoftcapOracleSemantics) {
  const size_t head_dim = 32, bs = 8;
  RandomKvPool pool(GetParam(), head_dim, bs, 12, 5);
  std::vector<int32_t> table(12);
  for (size_t i = 0; i < 12; ++i) table[i] = static_cast<int32_t>(i);
  std::mt19937 rng(8);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> q(head_dim);
  for (auto& x : q) x = d(rng);
  // Window 24 over 90 positions = the last 24 positions = blocks 8.. with context 90 - 64.
  std::vector<float> win = unwritten_floats(head_dim), full = unwritten_floats(head_dim);
  attend_head_reference(q.data(), pool.view(), 0, head_dim, table.data(), 90, 0.2f, win.data(),
                        AttendMods{0.0f, 24});
  std::vector<int32_t> shifted(table.begin() + 8, table.end());
  // Context 26 from block 8: positions 64..89, of which the window wants 66..89.
  std::vector<float> tail = unwritten_floats(head_dim);
  attend_head_reference(q.data(), pool.view(), 0, head_dim, shifted.data(), 26, 0.2f, tail.data(),
                        AttendMods{0.0f, 24});
  EXPECT_TRUE(within_tolerance(win, tail));
  attend_head_reference(q.data(), pool.view(), 0, head_dim, table.data(), 90, 0.2f, full.data());
  EXPECT_FALSE(within_tolerance(win, full));
  std::vector<float> big = unwritten_floats(head_dim), small = unwritten_floats(head_dim);
  attend_head_reference(q.data(), pool.view(), 0, head_dim, table.data(), 90, 0.2f, big.data(),
                        AttendMods{1e6f, 0});
  attend_head_reference(q.data(), pool.view(), 0, head_dim, table.data(), 90, 0.2f, small.data(),
                        AttendMods{0.5f, 0});
  EXPECT_TRUE(within_tolerance(big, full));
  EXPECT_FALSE(within_tolerance(small, full));
}

// A sequence whose attention scores are in the hundreds and move the running maximum. Block
// b's level (query 0's scores; the other queries' are scaled by 3/4 to 4/3) rises by 110
// from block to block within each run of four, 150, 260, 370, then drops to 0 for the fourth;
// on top, the runs drift up by 120 over the sequence, so the maximum rises again at every
// run's third block. A kernel that subtracts no maximum overflows exp (e^150 is inf in
// float); one that keeps its first block's maximum overflows at the third block; one that
// takes each block's own maximum for the running one overflows the correction exp(m - m_new)
// at the fourth; one that skips the correction weighs the early blocks as heavily as the
// later ones. Within a block the scores differ by a few units, so several positions carry
// weight.
//
// The scores are exact in float: queries are small integers, keys multiples of 1/8 below 256
// (exact in F16 too), so every partial sum of a score's fused multiply-add chain is exact, and
// the scale is 1/8. Otherwise float rounding of a score of 500 (some 1e-4) would alone move
// the weights past the tolerance, and the test would measure the score's conditioning rather
// than the softmax.
//
// The test attends the pool's second head (kv_offset = head_dim), whose K and V end the
// buffers, and the sequence's last block is the pool's last (the table runs backwards
// through the rest), so a read past the sequence's last position runs off the end of the
// heap buffer, where AddressSanitizer sees it.
struct RisingScores {
  static constexpr float kScale = 0.125f;
  size_t bs, head_dim, max_ctx, n_blocks;
  RandomKvPool pool;
  std::vector<int32_t> table;
  std::vector<std::vector<float>> q;  // kAttentionTile queries; q[0] is the decode query
  std::vector<float> scratch;

  RisingScores(GgmlType type, size_t block_size, size_t dim, size_t ctx, uint32_t seed)
      : bs(block_size),
        head_dim(dim),
        max_ctx(ctx),
        n_blocks((ctx + block_size - 1) / block_size),
        pool(type, 2 * dim, block_size, n_blocks, seed, dim),
        scratch(attention_scratch_floats(block_size, dim)) {
    for (size_t b = 0; b < n_blocks; ++b) {
      table.push_back(static_cast<int32_t>((2 * n_blocks - 2 - b) % n_blocks));
    }
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> coin(0, 1), noise(-16, 16);
    // Query 0: entries +-3 or +-4. The others share its signs with their own magnitudes, so
    // each sees the same profile scaled by q_i . q_0 / |q_0|^2, between 3/4 and 4/3.
    q.assign(kAttentionTile, std::vector<float>(dim));
    for (size_t d = 0; d < dim; ++d) {
      const float sign = coin(rng) ? 1.0f : -1.0f;
      for (auto& qi : q) qi[d] = sign * static_cast<float>(3 + coin(rng));
    }
    double qq = 0;
    for (float x : q[0]) qq += static_cast<double>(x) * x;
    for (size_t p = 0; p < n_blocks * bs; ++p) {
      const size_t b = p / bs;
      // The level query 0's scores have in block b; k = a * q_0 + noise, a on the 1/8 grid.
      const double drift =
          120.0 * static_cast<double>(b) / static_cast<double>(std::max<size_t>(1, n_blocks - 1));
      const double level = b % 4 == 3 ? 0.0 : 150.0 + 110.0 * static_cast<double>(b % 4) + drift;
      const float a = static_cast<float>(std::nearbyint(level * 8.0 / (kScale * qq)) / 8.0);
      const size_t slot = static_cast<size_t>(table[b]) * bs + p % bs;
      for (size_t d = 0; d < dim; ++d) {
        const float k = a * q[0][d] + static_cast<float>(noise(rng)) / 8.0f;
        pool.set_k(slot, dim + d, k);
      }
    }
  }

  // Query i's scores over its first n_ctx positions, in double from the stored K.
  std::vector<double> scores(size_t i, size_t n_ctx) const {
    std::vector<double> s(n_ctx);
    for (size_t p = 0; p < n_ctx; ++p) {
      const size_t slot = static_cast<size_t>(table[p / bs]) * bs + p % bs;
      double dot = 0;
      for (size_t d = 0; d < head_dim; ++d) {
        dot += static_cast<double>(q[i][d]) * pool.k_at(slot, head_dim + d);
      }
      s[p] = dot * kScale;
    }
    return s;
  }

  // The profile does what the comment above promises, for query i over n_ctx positions: scores
  // on the 1/64 grid (exact) and past e^88.7's range; from the third block on, one above the first
  // block's maximum, and from the fourth on, one below the running maximum, both by more
  // than that range.
  ::testing::AssertionResult large_and_moving(size_t i, size_t n_ctx) const {
    const std::vector<double> s = scores(i, n_ctx);
    double running = -INFINITY, first = -INFINITY, rise = 0, dip = 0;
    for (size_t b0 = 0; b0 < n_ctx; b0 += bs) {
      double block = -INFINITY;
      for (size_t p = b0; p < std::min(n_ctx, b0 + bs); ++p) {
        if (std::fabs(s[p] - std::nearbyint(s[p] * 64) / 64) != 0) {
          return ::testing::AssertionFailure() << "score " << p << " = " << s[p] << " off the grid";
        }
        block = std::max(block, s[p]);
      }
      if (b0 == 0) first = block;
      rise = std::max(rise, block - first);
      dip = std::max(dip, running - block);
      running = std::max(running, block);
    }
    if (running < 100) return ::testing::AssertionFailure() << "largest score " << running;
    if ((n_ctx > 2 * bs && rise < 100) || (n_ctx > 3 * bs && dip < 100)) {
      return ::testing::AssertionFailure() << "rise " << rise << ", dip " << dip;
    }
    return ::testing::AssertionSuccess();
  }

  std::vector<float> reference(size_t i, int32_t n_ctx) const {
    std::vector<float> ref = unwritten_floats(head_dim);
    attend_head_reference(q[i].data(), pool.view(), head_dim, head_dim, table.data(), n_ctx, kScale,
                          ref.data());
    return ref;
  }
  std::vector<float> alone(size_t i, int32_t n_ctx) {
    std::vector<float> out = unwritten_floats(head_dim);
    attend_head(q[i].data(), pool.view(), head_dim, head_dim, table.data(), n_ctx, kScale,
                scratch.data(), out.data());
    return out;
  }
  // Queries 0..n_q-1 as one tile, query i seeing n_ctx[i] positions.
  std::vector<std::vector<float>> tile(const std::vector<int32_t>& n_ctx) {
    const size_t n_q = n_ctx.size();
    std::vector<std::vector<float>> out(n_q, unwritten_floats(head_dim));
    std::vector<const float*> qp;
    std::vector<float*> op;
    for (size_t i = 0; i < n_q; ++i) {
      qp.push_back(q[i].data());
      op.push_back(out[i].data());
    }
    attend_tile(qp.data(), n_q, pool.view(), head_dim, head_dim, table.data(), n_ctx.data(), kScale,
                scratch.data(), op.data());
    return out;
  }
};

const size_t kBlockSizes[] = {1, 5, 8, 16, 17, 32, 48, 64, 80};
const size_t kHeadDims[] = {8, 16, 64, 72, 128};

// One decode query over contexts of one position up to the whole sequence.
TEST_P(Attention, LargeMovingScoresDecode) {
  IsaGuard guard;
  for (size_t bs : kBlockSizes) {
    for (size_t head_dim : kHeadDims) {
      RisingScores rs(GetParam(), bs, head_dim, 300, static_cast<uint32_t>(7 * bs + head_dim));
      std::vector<size_t> ctxs = {1, bs, bs + 1, 2 * bs + 1, 3 * bs + bs / 2, 7 * bs, 300};
      for (size_t n : ctxs) {
        if (n > rs.max_ctx) continue;
        const auto n_ctx = static_cast<int32_t>(n);
        SCOPED_TRACE(::testing::Message()
                     << "bs " << bs << " head_dim " << head_dim << " n_ctx " << n_ctx);
        ASSERT_TRUE(rs.large_and_moving(0, n));
        const auto ref = rs.reference(0, n_ctx);
        set_isa(Isa::scalar);
        const auto want = rs.alone(0, n_ctx);
        for (Isa isa : supported_isas()) {
          set_isa(isa);
          const auto out = rs.alone(0, n_ctx);
          EXPECT_TRUE(within_tolerance(out, ref)) << isa_name(isa);
          EXPECT_TRUE(same_bits(out, want)) << isa_name(isa);
        }
      }
    }
  }
}

// Prompt tiles (below and above the size at which the queries share K loads): the first
// chunk of a prompt, one crossing the second block border, and the last, ending at the
// sequence's end. Each query as alone, within tolerance, the same bits on every Isa.
TEST_P(Attention, LargeMovingScoresTile) {
  IsaGuard guard;
  for (size_t bs : kBlockSizes) {
    for (size_t head_dim : kHeadDims) {
      RisingScores rs(GetParam(), bs, head_dim, 160, static_cast<uint32_t>(5 * bs + head_dim));
      for (size_t n_q : {2u, 5u, 8u, 16u}) {
        const size_t last_first = rs.max_ctx - n_q + 1;
        const size_t border = std::clamp<size_t>(2 * bs, n_q / 2 + 1, last_first + n_q / 2);
        for (size_t first : {size_t{1}, border - n_q / 2, last_first}) {
          std::vector<int32_t> n_ctx;
          for (size_t i = 0; i < n_q; ++i) n_ctx.push_back(static_cast<int32_t>(first + i));
          SCOPED_TRACE(::testing::Message() << "bs " << bs << " head_dim " << head_dim << " n_q "
                                            << n_q << " n_ctx from " << first);
          std::vector<std::vector<float>> ref;
          for (size_t i = 0; i < n_q; ++i) {
            ASSERT_TRUE(rs.large_and_moving(i, first + i)) << "query " << i;
            ref.push_back(rs.reference(i, n_ctx[i]));
          }
          set_isa(Isa::scalar);
          const auto want = rs.tile(n_ctx);
          for (Isa isa : supported_isas()) {
            set_isa(isa);
            const auto tiled = rs.tile(n_ctx);
            for (size_t i = 0; i < n_q; ++i) {
              EXPECT_TRUE(within_tolerance(tiled[i], ref[i])) << isa_name(isa) << " query " << i;
              EXPECT_TRUE(same_bits(tiled[i], want[i])) << isa_name(isa) << " query " << i;
              EXPECT_TRUE(same_bits(tiled[i], rs.alone(i, n_ctx[i])))
                  << isa_name(isa) << " query " << i;
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
