// quantize_row: known-answer blocks (the FORMATS.md examples re-encoded from their values),
// quantize -> dequantize error bounds for every type, and argument checking.
#include "kernels/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "test_compare.h"

namespace lift::kernels {
namespace {

// Every byte of the row written (test::written_bytes), so known answers with zero bytes count.
std::vector<uint8_t> quantize(GgmlType t, const std::vector<float>& x) {
  return test::written_bytes(ggml_row_bytes(t, x.size()),
                             [&](uint8_t* dst) { quantize_row(t, x.data(), dst, x.size()); });
}

// Decoded into the unwritten sentinel (a NaN), which fails every comparison below.
std::vector<float> roundtrip(GgmlType t, const std::vector<float>& x) {
  const std::vector<uint8_t> q = quantize(t, x);
  std::vector<float> y = test::unwritten_floats(x.size());
  dequantize_row(t, q.data(), y.data(), x.size());
  return y;
}

std::vector<float> values(float d, float m, int (*q)(int)) {
  std::vector<float> x(32);
  for (int e = 0; e < 32; ++e) x[e] = d * static_cast<float>(q(e)) + m;
  return x;
}

// ---- known answers: FORMATS.md's example blocks come back byte for byte -------------------

TEST(KernelQuantize, Q4_0KnownAnswer) {
  // d = 0.25; element j has code j, element j+16 code 15-j: values 0.25 * (q - 8).
  const auto x = values(0.25f, -2.0f, [](int e) { return e < 16 ? e : 31 - e; });
  const std::vector<uint8_t> want = {0x00, 0x34, 0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96,
                                     0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f};
  EXPECT_EQ(quantize(GgmlType::Q4_0, x), want);
}

TEST(KernelQuantize, Q4_1KnownAnswer) {
  const auto x = values(0.5f, -1.0f, [](int e) { return e < 16 ? e : 31 - e; });
  const std::vector<uint8_t> want = {0x00, 0x38, 0x00, 0xbc, 0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5,
                                     0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f};
  EXPECT_EQ(quantize(GgmlType::Q4_1, x), want);
}

TEST(KernelQuantize, Q5_0KnownAnswer) {
  const auto x = values(0.125f, -2.0f, [](int e) { return e; });
  const std::vector<uint8_t> want = {0x00, 0x30, 0x00, 0x00, 0xff, 0xff, 0x00, 0x11,
                                     0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99,
                                     0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
  EXPECT_EQ(quantize(GgmlType::Q5_0, x), want);
}

TEST(KernelQuantize, Q5_1KnownAnswer) {
  const auto x = values(0.25f, -4.0f, [](int e) { return 31 - e; });
  const std::vector<uint8_t> want = {0x00, 0x34, 0x00, 0xc4, 0xff, 0xff, 0x00, 0x00,
                                     0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88,
                                     0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00};
  EXPECT_EQ(quantize(GgmlType::Q5_1, x), want);
}

TEST(KernelQuantize, Q8_0KnownAnswer) {
  // d = 0.5 needs max|x| = 63.5: element 0 is -127 * 0.5, the rest 0.5 * (e - 16).
  auto x = values(0.5f, -8.0f, [](int e) { return e; });
  x[0] = -63.5f;
  const std::vector<uint8_t> q = quantize(GgmlType::Q8_0, x);
  ASSERT_EQ(q.size(), 34u);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x38);  // f16 0.5
  EXPECT_EQ(static_cast<int8_t>(q[2]), -127);
  for (int e = 1; e < 32; ++e) EXPECT_EQ(static_cast<int8_t>(q[2 + e]), e - 16) << e;
}

TEST(KernelQuantize, SymmetricTypesKeepTheLargestValueSign) {
  // The extreme value is positive here, so d is negative and 7.0 itself is exact.
  std::vector<float> x(32, 0.0f);
  x[5] = 7.0f;
  x[9] = -7.0f;  // the opposite extreme clamps to code 15: d * 7 = -6.125
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0}) {
    const std::vector<float> y = roundtrip(t, x);
    EXPECT_EQ(y[5], 7.0f) << ggml_type_name(t);
    EXPECT_EQ(y[0], 0.0f) << ggml_type_name(t);
  }
  EXPECT_EQ(roundtrip(GgmlType::Q4_0, x)[9], -6.125f);          // d = -0.875, code 15
  EXPECT_EQ(roundtrip(GgmlType::Q5_0, x)[9], -7.0f + 0.4375f);  // d = -0.4375, code 31
  uint16_t d;
  std::memcpy(&d, quantize(GgmlType::Q4_0, x).data(), 2);
  EXPECT_EQ(f16_to_f32(d), -0.875f);
}

TEST(KernelQuantize, ZeroAndConstantBlocks) {
  const std::vector<float> zeros(64, 0.0f);
  const std::vector<float> sevens(64, 7.9375f);  // 127 / 16: every scale is exact in f16
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    for (float v : roundtrip(t, zeros)) EXPECT_EQ(v, 0.0f);
    for (float v : roundtrip(t, sevens)) EXPECT_EQ(v, 7.9375f);
  }
}

// ---- error bounds ------------------------------------------------------------------------

// Worst-case |x - y| for one block of x under type t (see quantize.h for the schemes). The f16
// rounding of a scale (relative error <= 2^-11) is multiplied by the largest code magnitude.
double block_bound(GgmlType t, const float* x) {
  double amax = 0, lo = x[0], hi = x[0];
  for (int e = 0; e < 32; ++e) {
    amax = std::max(amax, std::fabs(static_cast<double>(x[e])));
    lo = std::min(lo, static_cast<double>(x[e]));
    hi = std::max(hi, static_cast<double>(x[e]));
  }
  const double u = 1.0 / 2048;
  switch (t) {
    case GgmlType::Q8_0:
      return amax / 127 * (0.5 + 127 * u) + 1e-7;
    case GgmlType::Q4_0:  // the opposite extreme may clamp: a full step
      return amax / 8 * (1.0 + 8 * u) + 1e-7;
    case GgmlType::Q5_0:
      return amax / 16 * (1.0 + 16 * u) + 1e-7;
    case GgmlType::Q4_1:
      return (hi - lo) / 15 * (0.5 + 15 * u) + std::fabs(lo) * u + 1e-7;
    case GgmlType::Q5_1:
      return (hi - lo) / 31 * (0.5 + 31 * u) + std::fabs(lo) * u + 1e-7;
    default:
      return 0;
  }
}

TEST(KernelQuantize, RoundTripErrorWithinBounds) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> uniform(-3.0f, 5.0f);
  const size_t n = 32 * 64;
  for (int dist = 0; dist < 3; ++dist) {
    std::vector<float> x(n);
    for (size_t k = 0; k < n; ++k) {
      x[k] = dist == 0 ? normal(rng) : uniform(rng);
      if (dist == 2 && k % 97 == 0) x[k] *= 100.0f;  // outliers
    }
    for (GgmlType t :
         {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
      SCOPED_TRACE(std::string(ggml_type_name(t)) + " distribution " + std::to_string(dist));
      const std::vector<float> y = roundtrip(t, x);
      double sq_err = 0, sq = 0;
      for (size_t b = 0; b < n / 32; ++b) {
        const double bound = block_bound(t, &x[b * 32]);
        for (size_t e = b * 32; e < b * 32 + 32; ++e) {
          const double err = std::fabs(static_cast<double>(x[e]) - y[e]);
          ASSERT_LE(err, bound) << "element " << e << ": " << x[e] << " -> " << y[e];
          sq_err += err * err;
          sq += static_cast<double>(x[e]) * x[e];
        }
      }
      // Relative RMS error: roughly 2^-bits of the format, far below these ceilings.
      const double rel = std::sqrt(sq_err / sq);
      const double ceiling = t == GgmlType::Q8_0 ? 0.01 : t == GgmlType::Q4_0 ? 0.15 : 0.08;
      if (dist != 2) {
        EXPECT_LT(rel, ceiling);
      }
    }
  }
}

// K-quants and IQ4_NL: relative RMS errors of their bit widths on N(0, 0.02) weights, decoded by
// the independent decoders (dequantize_row); zeros stay zeros.
TEST(KernelQuantize, KQuantRoundTrip) {
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const size_t n = 256 * 16;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  // (Measured: Q2_K 0.33, Q3_K 0.15, IQ4_NL 0.079, Q4_K 0.079, Q5_K 0.038, Q6_K 0.019,
  // IQ4_XS 0.080.)
  const std::pair<GgmlType, double> types[] = {{GgmlType::Q2_K, 0.45},   {GgmlType::Q3_K, 0.22},
                                               {GgmlType::IQ4_NL, 0.12}, {GgmlType::Q4_K, 0.12},
                                               {GgmlType::Q5_K, 0.06},   {GgmlType::Q6_K, 0.03},
                                               {GgmlType::IQ4_XS, 0.12}};
  for (const auto& [t, ceiling] : types) {
    SCOPED_TRACE(ggml_type_name(t));
    const std::vector<float> y = roundtrip(t, x);
    double sq_err = 0, sq = 0;
    for (size_t e = 0; e < n; ++e) {
      const double err = std::fabs(static_cast<double>(x[e]) - y[e]);
      sq_err += err * err;
      sq += static_cast<double>(x[e]) * x[e];
    }
    EXPECT_LT(std::sqrt(sq_err / sq), ceiling);
  }
  // All-zero super-blocks decode to zeros.
  const std::vector<float> zeros(256, 0.0f);
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    EXPECT_EQ(roundtrip(t, zeros), zeros) << ggml_type_name(t);
  }
}

TEST(KernelQuantize, FloatTypesRoundToNearest) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(1000);
  for (float& v : x) v = normal(rng);
  x[0] = 65504.0f;  // largest half
  x[1] = 1e-6f;     // half subnormal
  const std::vector<float> f32 = roundtrip(GgmlType::F32, x);
  EXPECT_EQ(f32, x);
  const std::vector<float> f16 = roundtrip(GgmlType::F16, x);
  const std::vector<float> bf16 = roundtrip(GgmlType::BF16, x);
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_EQ(f16[k], f16_to_f32(f32_to_f16(x[k])));
    EXPECT_EQ(bf16[k], bf16_to_f32(f32_to_bf16(x[k])));
    if (k != 1) {
      EXPECT_LE(std::fabs(f16[k] - x[k]), std::fabs(x[k]) * 0x1p-11f);
    }
    EXPECT_LE(std::fabs(bf16[k] - x[k]), std::fabs(x[k]) * 0x1p-8f);
  }
  EXPECT_EQ(f16[0], 65504.0f);
}

TEST(KernelQuantize, RequantizingIsStable) {
  // Values already on a type's grid come back unchanged, so a second pass is the identity.
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(32 * 16);
  for (float& v : x) v = normal(rng);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0}) {
    const std::vector<float> once = roundtrip(t, x);
    const std::vector<float> twice = roundtrip(t, once);
    double max_diff = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const double diff = std::fabs(static_cast<double>(once[k]) - twice[k]);
      ASSERT_FALSE(std::isnan(diff)) << ggml_type_name(t) << " element " << k;
      max_diff = std::max(max_diff, diff);
    }
    // Only the f16 re-rounding of a recomputed scale may move values, by a few ulps of d.
    EXPECT_LT(max_diff, 1e-5) << ggml_type_name(t);
  }
}

TEST(KernelQuantize, UnalignedDestinationAndMultipleBlocks) {
  std::vector<float> x(96);
  for (size_t k = 0; k < x.size(); ++k) x[k] = std::sin(static_cast<float>(k));
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::F16}) {
    const std::vector<uint8_t> aligned = quantize(t, x);
    // One byte in front to misalign the row, none after it; filled with two different values
    // so that an unwritten byte shows, and the front byte must keep its fill.
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}}) {
      std::vector<uint8_t> buf(aligned.size() + 1, fill);
      quantize_row(t, x.data(), buf.data() + 1, x.size());
      EXPECT_EQ(buf[0], fill) << ggml_type_name(t);
      EXPECT_EQ(std::vector<uint8_t>(buf.begin() + 1, buf.end()), aligned) << ggml_type_name(t);
    }
  }
}

TEST(KernelQuantize, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(1024);
  try {
    quantize_row(GgmlType::Q4_0, x.data(), out.data(), 40);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_0"), std::string::npos) << e.what();
  }
  try {
    quantize_row(GgmlType::Q4_K, x.data(), out.data(), 64);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K"), std::string::npos) << e.what();
  }
  try {
    quantize_row(GgmlType::IQ2_XXS, x.data(), out.data(), 64);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  }
  // Exactly 7 values into exactly their 14 bytes.
  const std::vector<float> x7(7, 1.0f);
  std::vector<uint8_t> out7(ggml_row_bytes(GgmlType::F16, 7));
  EXPECT_NO_THROW(quantize_row(GgmlType::F16, x7.data(), out7.data(), 7));
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(out7[2 * i] | out7[2 * i + 1] << 8, 0x3C00) << i;
}

}  // namespace
}  // namespace lift::kernels
