// AMX prompt-row products (kernels/panel_amx.h): the bf16x2 packing is split_bf16x2's, the
// weight split is exact for every F16 value, products stay within tolerance of the reference
// on the same rounded activations, and a row's bits do not depend on the rest of the call.
#include "kernels/panel_amx.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/act_quant.h"
#include "kernels/bf16x2.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"

namespace lift::kernels {
namespace {

using testing::IsaGuard;

bool have_amx() {
  if (best_isa() < Isa::amx) return false;
  set_isa(Isa::amx);
  return true;
}

struct Packed {
  std::unique_ptr<uint8_t, decltype(&std::free)> mem{nullptr, &std::free};
  uint8_t* get() const { return mem.get(); }
};

// Packed rows in a buffer of exactly amx_act_bytes (a whole number of 1 KB tiles, so also the
// multiple of the alignment aligned_alloc needs), first filled with 0xFF bytes: a bf16 NaN
// wherever packing leaves something unwritten, the zero padding included.
Packed pack(const float* x, size_t n_in, size_t n_rows) {
  Packed p;
  const size_t bytes = amx_act_bytes(n_in, n_rows);
  EXPECT_EQ(bytes % 64, 0u);
  p.mem.reset(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  std::memset(p.get(), 0xFF, bytes);
  for (size_t g = 0; g < (n_rows + 15) / 16; ++g) amx_pack_activations(x, n_in, n_rows, g, p.get());
  return p;
}

// Element (r, k) of the packed hi or lo plane.
uint16_t packed_at(const uint8_t* p, size_t n_in, size_t r, size_t k, int part) {
  const size_t steps = (n_in + 31) / 32;
  const size_t off = (((r / 16) * steps + k / 32) * 2 + static_cast<size_t>(part)) * 1024 +
                     (r % 16) * 64 + (k % 32) * 2;
  uint16_t v;
  std::memcpy(&v, p + off, 2);
  return v;
}

struct AmxProblem {
  GgmlType wt;
  size_t n_in, n_out, n_rows, w_row_bytes;
  std::vector<uint8_t> w;
  std::vector<float> x;
  PanelMatrix pm;

  AmxProblem(GgmlType t, size_t in, size_t out, size_t rows, std::mt19937& rng)
      : wt(t), n_in(in), n_out(out), n_rows(rows) {
    w_row_bytes = ggml_row_bytes(t, n_in) + 4;
    w = testing::random_weights(t, n_out, n_in, 4, rng);
    x = testing::random_activations(n_in * rows, rng);
    pm = pack_panels(t, w.data(), w_row_bytes, n_in, n_out);
  }
  std::vector<float> run(size_t r0, size_t nr, size_t ob, size_t oe,
                         std::vector<float> y = {}) const {
    if (y.empty()) y = testing::unwritten_floats(nr * n_out);
    const Packed p = pack(x.data() + r0 * n_in, n_in, nr);
    matmul_panels_amx(pm, p.get(), nr, y.data(), n_out, ob, oe);
    return y;
  }
  std::vector<float> reference() const {
    const size_t stride = act_row_bytes(ActFormat::bf16x2, n_in);
    std::vector<uint8_t> act(stride * n_rows, 0xFF);
    for (size_t r = 0; r < n_rows; ++r) {
      quantize_activation_row(ActFormat::bf16x2, x.data() + r * n_in, n_in,
                              act.data() + r * stride);
    }
    std::vector<float> y = testing::unwritten_floats(n_rows * n_out);
    matmul_reference(wt, w.data(), w_row_bytes, n_in, ActFormat::bf16x2, act.data(), stride, n_rows,
                     y.data(), n_out, 0, n_out);
    return y;
  }
  std::string label() const {
    return std::string(ggml_type_name(wt)) + " n_in=" + std::to_string(n_in) +
           " n_out=" + std::to_string(n_out);
  }
};

TEST(KernelAmx, SplitIsExactToSixteenBits) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = nd(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
    uint16_t hi, lo;
    split_bf16x2(x, hi, lo);
    const double sum = static_cast<double>(bf16_value(hi)) + static_cast<double>(bf16_value(lo));
    ASSERT_LE(std::fabs(sum - x), std::fabs(x) * std::ldexp(1.0, -16)) << x;
  }
  uint16_t hi, lo;
  split_bf16x2(1e-40f, hi, lo);  // subnormal: flushed, as the tile multiplier reads it
  EXPECT_EQ(hi, 0);
  EXPECT_EQ(lo, 0);
}

TEST(KernelAmx, PackedRowsAreTheScalarSplit) {
  IsaGuard guard;
  if (!have_amx()) GTEST_SKIP() << "no AMX on this CPU";
  std::mt19937 rng(2);
  for (size_t n_in : {1u, 31u, 32u, 77u, 256u}) {
    const size_t n_rows = 19;
    auto x = testing::random_activations(n_in * n_rows, rng);
    // Ties, zeros and subnormals too.
    x[0] = std::bit_cast<float>(0x3F808000u);
    if (x.size() > 3) {
      x[1] = -0.0f;
      x[2] = 1e-41f;
      x[3] = std::bit_cast<float>(0x3F818000u);
    }
    const Packed p = pack(x.data(), n_in, n_rows);
    std::vector<uint8_t> row;
    for (size_t r = 0; r < 32; ++r) {  // two row groups, the rows past n_rows zero
      if (r < n_rows) {
        row = testing::written_bytes(act_row_bytes(ActFormat::bf16x2, n_in), [&](uint8_t* dst) {
          quantize_activation_row(ActFormat::bf16x2, &x[r * n_in], n_in, dst);
        });
      }
      for (size_t k = 0; k < (n_in + 31) / 32 * 32; ++k) {
        for (int part = 0; part < 2; ++part) {
          uint16_t want = 0;
          if (r < n_rows && k < n_in) std::memcpy(&want, row.data() + 2 * (part * n_in + k), 2);
          ASSERT_EQ(packed_at(p.get(), n_in, r, k, part), want)
              << "n_in " << n_in << " row " << r << " k " << k << " part " << part;
        }
      }
    }
  }
}

// With one-hot activations every output is one weight times 1: the hi + lo split must give
// back every finite F16 value exactly, subnormals and signed zeros included.
TEST(KernelAmx, EveryF16WeightSplitsExactly) {
  IsaGuard guard;
  if (!have_amx()) GTEST_SKIP() << "no AMX on this CPU";
  const size_t n_in = 32, n_out = 2048;
  std::vector<uint16_t> w(n_out * n_in);
  for (size_t i = 0; i < w.size(); ++i) {
    const auto h = static_cast<uint16_t>(i);
    w[i] = (h & 0x7C00u) == 0x7C00u ? 0 : h;  // inf/nan patterns replaced by zero
  }
  const PanelMatrix pm = pack_panels(GgmlType::F16, w.data(), n_in * 2, n_in, n_out);
  std::vector<float> x(n_in * n_in, 0.0f);
  for (size_t k = 0; k < n_in; ++k) x[k * n_in + k] = 1.0f;
  const Packed p = pack(x.data(), n_in, n_in);
  std::vector<float> y = testing::unwritten_floats(n_in * n_out);
  matmul_panels_amx(pm, p.get(), n_in, y.data(), n_out, 0, n_out);
  for (size_t k = 0; k < n_in; ++k) {
    for (size_t o = 0; o < n_out; ++o) {
      const float want = f16_to_f32(w[o * n_in + k]);
      ASSERT_EQ(std::bit_cast<uint32_t>(y[k * n_out + o]) & 0x7FFFFFFFu,
                std::bit_cast<uint32_t>(want) & 0x7FFFFFFFu)
          << "f16 0x" << std::hex << w[o * n_in + k];
    }
  }
}

TEST(KernelAmx, MatchesReference) {
  IsaGuard guard;
  if (!have_amx()) GTEST_SKIP() << "no AMX on this CPU";
  std::mt19937 rng(42);
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    for (size_t n_in : {1u, 7u, 32u, 33u, 100u, 256u, 300u, 4099u}) {
      for (size_t n_out : {5u, 16u, 37u, 130u}) {
        const size_t max_rows = n_in > 1000 ? 17 : 40;
        AmxProblem prob(t, n_in, n_out, max_rows, rng);
        const auto ref = prob.reference();
        for (size_t nr : {1u, 5u, 16u, 17u, 40u}) {
          if (nr > max_rows) continue;
          testing::expect_close(prob.run(0, nr, 0, n_out), ref, nr, n_out,
                                prob.label() + " rows " + std::to_string(nr));
        }
      }
    }
  }
}

// More rows than one pass over a weight block takes (512), and several weight blocks.
TEST(KernelAmx, MatchesReferencePrefillShape) {
  IsaGuard guard;
  if (!have_amx()) GTEST_SKIP() << "no AMX on this CPU";
  std::mt19937 rng(5);
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    AmxProblem prob(t, 768, 70, 600, rng);
    testing::expect_close(prob.run(0, prob.n_rows, 0, prob.n_out), prob.reference(), prob.n_rows,
                          prob.n_out, prob.label());
  }
}

// A row's outputs do not depend on its companions, its place in the call, or the column split.
TEST(KernelAmx, BatchAndSplitInvariantBitwise) {
  IsaGuard guard;
  if (!have_amx()) GTEST_SKIP() << "no AMX on this CPU";
  std::mt19937 rng(99);
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    for (size_t n_in : {32u, 300u, 1056u}) {
      const size_t n_out = 77, n_rows = 70;
      AmxProblem prob(t, n_in, n_out, n_rows, rng);
      testing::expect_row_and_split_invariance(prob, {1, 3, 16, 17, 64},
                                               {{0, 16, 32, 48, 64, 77}, {0, 64, 77}, {0, 32, 77}});
    }
  }
}

TEST(KernelAmx, WritesOnlyItsRangeAndRejectsMisuse) {
  IsaGuard guard;
  if (!have_amx()) GTEST_SKIP() << "no AMX on this CPU";
  std::mt19937 rng(3);
  AmxProblem prob(GgmlType::F16, 64, 40, 3, rng);
  const auto full = prob.run(0, 3, 0, 40);
  std::vector<float> y(3 * 40, -7.0f);
  y = prob.run(0, 3, 16, 35, std::move(y));
  for (size_t r = 0; r < 3; ++r) {
    for (size_t o = 0; o < 40; ++o) {
      if (o >= 16 && o < 35) {
        EXPECT_TRUE(testing::same_bits(&y[r * 40 + o], &full[r * 40 + o], 1))
            << "row " << r << " output " << o;
      } else {
        EXPECT_EQ(y[r * 40 + o], -7.0f) << "row " << r << " output " << o;
      }
    }
  }
  const Packed p = pack(prob.x.data(), 64, 3);
  EXPECT_THROW(matmul_panels_amx(prob.pm, p.get(), 3, y.data(), 40, 8, 40), std::invalid_argument);
  set_isa(Isa::avx512);
  EXPECT_THROW(matmul_panels_amx(prob.pm, p.get(), 3, y.data(), 40, 0, 40), std::invalid_argument);
}

}  // namespace
}  // namespace lift::kernels
