#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/isa.h"
#include "kernels/ops.h"

namespace lift::kernels {
namespace {

using testing::IsaGuard;
using testing::supported_isas;

// SwiGLU is shared by both backends: every ISA gives the same bits, close to the formula in
// double, including the tails (odd lengths) and extreme gates (exp overflow and underflow).
TEST(Swiglu, SameBitsOnEveryIsaAndCloseToDouble) {
  IsaGuard guard;
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (size_t n : {1u, 7u, 16u, 33u, 2048u}) {
    std::vector<float> g(n), u(n);
    for (size_t i = 0; i < n; ++i) {
      g[i] = nd(rng);
      u[i] = nd(rng);
    }
    if (n > 4) {
      g[0] = 100.0f;   // exp(-g) underflows to 0: out = g * u
      g[1] = -100.0f;  // exp(-g) overflows to inf: out = -0 * u
    }
    std::vector<float> first;
    for (Isa isa : supported_isas()) {
      set_isa(isa);
      std::vector<float> out = testing::unwritten_floats(n);
      swiglu(g.data(), u.data(), n, out.data());
      for (size_t i = 0; i < n; ++i) {
        const double e = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
        EXPECT_NEAR(out[i], e, 1e-6 * std::max(1.0, std::fabs(e))) << "n=" << n << " i=" << i;
      }
      if (first.empty()) {
        first = out;
      } else {
        EXPECT_TRUE(testing::same_bits(first, out)) << isa_name(isa);
      }
    }
  }
}

// GeGLU (gelu tanh-approximation) likewise: the same bits on every ISA, close to the formula.
TEST(Geglu, SameBitsOnEveryIsaAndCloseToDouble) {
  IsaGuard guard;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (size_t n : {1u, 7u, 16u, 33u, 2048u}) {
    std::vector<float> g(n), u(n);
    for (size_t i = 0; i < n; ++i) {
      g[i] = nd(rng);
      u[i] = nd(rng);
    }
    if (n > 4) {
      g[0] = 30.0f;   // gelu(g) = g
      g[1] = -30.0f;  // gelu(g) = -0
      g[2] = 1e-6f;   // near 0: no cancellation
    }
    std::vector<float> first;
    for (Isa isa : supported_isas()) {
      set_isa(isa);
      std::vector<float> out = testing::unwritten_floats(n);
      geglu(g.data(), u.data(), n, out.data());
      for (size_t i = 0; i < n; ++i) {
        const double z = g[i];
        const double e =
            0.5 * z *
            (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (z + 0.044715 * z * z * z))) *
            u[i];
        EXPECT_NEAR(out[i], e, 1e-6 * std::max(1e-3, std::fabs(e))) << "n=" << n << " i=" << i;
      }
      if (first.empty()) {
        first = out;
      } else {
        EXPECT_TRUE(testing::same_bits(first, out)) << isa_name(isa);
      }
    }
  }
}

// Rotary embedding: adjacent pairs (2i, 2i + 1) and NEOX pairs (i, i + rope_dim / 2), each
// pair rotated by its own angle, dims past rope_dim untouched.
TEST(Rope, AdjacentAndNeoxPairs) {
  const size_t head_dim = 12, rope_dim = 8, heads = 2;
  std::vector<float> inv_freq = {1.0f, 0.5f, 0.25f, 0.125f};
  std::vector<float> cs(rope_dim);
  rope_table(3, rope_dim, inv_freq.data(), cs.data());
  std::vector<float> x(head_dim * heads);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.1f - 1.0f;
  for (RopeStyle style : {RopeStyle::adjacent, RopeStyle::neox}) {
    std::vector<float> y = x;
    rope_row(y.data(), heads, head_dim, rope_dim, cs.data(), style);
    for (size_t h = 0; h < heads; ++h) {
      for (size_t i = 0; i < rope_dim / 2; ++i) {
        const size_t a = h * head_dim + (style == RopeStyle::neox ? i : 2 * i);
        const size_t b = style == RopeStyle::neox ? a + rope_dim / 2 : a + 1;
        const double th = 3.0 * inv_freq[i];
        EXPECT_NEAR(y[a], x[a] * std::cos(th) - x[b] * std::sin(th), 1e-6);
        EXPECT_NEAR(y[b], x[a] * std::sin(th) + x[b] * std::cos(th), 1e-6);
      }
      for (size_t i = rope_dim; i < head_dim; ++i)
        EXPECT_EQ(y[h * head_dim + i], x[h * head_dim + i]);
    }
  }
}

TEST(Softcap, CapTimesTanh) {
  std::vector<float> x = {-1000.0f, -30.0f, -1.0f, 0.0f, 1e-3f, 2.0f, 45.0f, 1e9f};
  std::vector<float> y = x;
  softcap_scores(y.data(), y.size(), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], 30.0 * std::tanh(x[i] / 30.0), 1e-5 * 30.0) << x[i];
    EXPECT_LE(std::fabs(y[i]), 30.0f);
  }
}

// RMSNorm against the formula in long double, for lengths with and without a tail of lanes.
TEST(RmsNorm, MatchesFormula) {
  std::mt19937 rng(6);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (size_t dim : {1u, 7u, 8u, 64u, 77u, 768u}) {
    std::vector<float> x(dim), w(dim), y = testing::unwritten_floats(dim);
    for (size_t i = 0; i < dim; ++i) {
      x[i] = nd(rng);
      w[i] = nd(rng);
    }
    rmsnorm_row(x.data(), w.data(), dim, 1e-5f, y.data());
    long double ss = 0;
    for (float v : x) ss += static_cast<long double>(v) * v;
    const long double scale = 1.0L / std::sqrt(ss / dim + 1e-5L);
    for (size_t i = 0; i < dim; ++i) {
      const double e = static_cast<double>(x[i] * scale * w[i]);
      EXPECT_NEAR(y[i], e, 1e-6 * std::max(1.0, std::fabs(e))) << "dim " << dim << " i " << i;
    }
  }
}

}  // namespace
}  // namespace lift::kernels
