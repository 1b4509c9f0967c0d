#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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
