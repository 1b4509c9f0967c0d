// The comparison helpers themselves (tests/test_compare.h, tests/kernels/kernel_test_util.h):
// each fails on a NaN on either side, on an element left at the unwritten sentinel, on an
// error past the tolerance and on mismatched or empty sizes, and passes what it should.
#include "test_compare.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_util.h"

namespace lift::kernels {
namespace {

using test::same_bits;
using test::unwritten;
using test::unwritten_floats;
using test::within_tolerance;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Two rows of three: the second row's largest |r| is 200, so its tolerance is 0.02.
const std::vector<float> kRef = {0.5f, -0.25f, 1.0f, 200.0f, -3.0f, 7.0f};

TEST(KernelTestUtil, SentinelIsASignallingNaN) {
  const float s = unwritten();
  EXPECT_TRUE(std::isnan(s));
  EXPECT_EQ(std::bit_cast<uint32_t>(s) & 0x00400000u, 0u);  // quiet bit clear
  EXPECT_TRUE(test::is_unwritten(unwritten_floats(3)[2]));
  EXPECT_FALSE(test::is_unwritten(kNaN));
  // What arithmetic makes of it is a quiet NaN, which is no longer the sentinel.
  volatile float v = s;
  EXPECT_FALSE(test::is_unwritten(v + 1.0f));
}

TEST(KernelTestUtil, WithinToleranceAcceptsErrorsUpToTheBound) {
  std::vector<float> x = kRef;
  EXPECT_TRUE(within_tolerance(x, kRef, 2, 3));
  x[0] += 0.9e-4f;  // row 0: tolerance 1e-4 (max |r| = 1)
  x[4] += 0.019f;   // row 1: tolerance 0.02
  EXPECT_TRUE(within_tolerance(x, kRef, 2, 3));
  // A reference with more rows than compared.
  EXPECT_TRUE(within_tolerance(std::vector<float>(kRef.begin(), kRef.begin() + 3), kRef, 1, 3));
}

TEST(KernelTestUtil, WithinToleranceFailsOnTooLargeAnError) {
  std::vector<float> x = kRef;
  x[1] += 1.5e-4f;
  EXPECT_FALSE(within_tolerance(x, kRef, 2, 3));
  x = kRef;
  x[5] += 0.03f;  // row 1's tolerance is per row: 0.02, not 1e-4 * 7
  EXPECT_FALSE(within_tolerance(x, kRef, 2, 3));
  // Row 0's small values get row 0's tolerance, not row 1's.
  x = kRef;
  x[2] += 0.01f;
  EXPECT_FALSE(within_tolerance(x, kRef, 2, 3));
}

TEST(KernelTestUtil, WithinToleranceFailsOnNaNInEitherSide) {
  for (size_t i = 0; i < kRef.size(); ++i) {
    std::vector<float> x = kRef, r = kRef;
    x[i] = kNaN;
    EXPECT_FALSE(within_tolerance(x, kRef, 2, 3)) << "NaN in x at " << i;
    r[i] = kNaN;
    EXPECT_FALSE(within_tolerance(kRef, r, 2, 3)) << "NaN in r at " << i;
    EXPECT_FALSE(within_tolerance(r, r, 2, 3)) << "NaN on both sides at " << i;
    x = kRef;
    x[i] = kInf;
    EXPECT_FALSE(within_tolerance(x, kRef, 2, 3)) << "inf in x at " << i;
  }
}

TEST(KernelTestUtil, WithinToleranceFailsOnAnUnwrittenElement) {
  std::vector<float> x = kRef;
  x[4] = unwritten();
  const auto res = within_tolerance(x, kRef, 2, 3);
  EXPECT_FALSE(res);
  EXPECT_NE(std::string(res.message()).find("never written"), std::string::npos) << res.message();
  // Two unwritten buffers do not match each other.
  EXPECT_FALSE(within_tolerance(unwritten_floats(6), unwritten_floats(6), 2, 3));
}

TEST(KernelTestUtil, WithinToleranceFailsOnSizes) {
  EXPECT_FALSE(within_tolerance(kRef, kRef, 3, 3));                                  // ref short
  EXPECT_FALSE(within_tolerance(kRef, kRef, 1, 3));                                  // got long
  EXPECT_FALSE(within_tolerance(std::vector<float>{}, std::vector<float>{}, 0, 3));  // empty
  EXPECT_FALSE(within_tolerance(std::vector<float>(3, 1.0f), std::vector<float>(4, 1.0f)));
}

TEST(KernelTestUtil, SameBitsFailsOnNaNAndUnwrittenEvenWhenBothSidesAgree) {
  EXPECT_TRUE(same_bits(kRef, kRef));
  std::vector<float> a = kRef;
  a[3] = kNaN;
  EXPECT_FALSE(same_bits(a, a));
  EXPECT_FALSE(same_bits(unwritten_floats(4), unwritten_floats(4)));
  EXPECT_FALSE(same_bits(std::vector<float>{}, std::vector<float>{}));
  // Differing bits, the sign of zero included; infinities that agree are values.
  std::vector<float> b = kRef;
  b[2] = std::nextafter(b[2], 2.0f);
  EXPECT_FALSE(same_bits(kRef, b));
  EXPECT_FALSE(same_bits(std::vector<float>{0.0f}, std::vector<float>{-0.0f}));
  EXPECT_TRUE(same_bits(std::vector<float>{kInf}, std::vector<float>{kInf}));
  EXPECT_FALSE(same_bits(kRef, std::vector<float>(kRef.begin(), kRef.end() - 1)));
}

void leave_last_byte(uint8_t* dst) {
  for (size_t i = 0; i + 1 < 8; ++i) dst[i] = static_cast<uint8_t>(i);
}

TEST(KernelTestUtil, WrittenBytesFailsOnAnUnwrittenByte) {
  EXPECT_NONFATAL_FAILURE(test::written_bytes(8, leave_last_byte), "byte 7 of 8 was not written");
  const auto all = test::written_bytes(3, [](uint8_t* d) { d[0] = d[1] = d[2] = 0; });
  EXPECT_EQ(all, std::vector<uint8_t>(3, 0));
}

void expect_close_with_nan() {
  std::vector<float> x = kRef;
  x[0] = kNaN;
  testing::expect_close(x, kRef, 2, 3, "nan");
}

TEST(KernelTestUtil, ExpectCloseFailsOnNaN) {
  EXPECT_NONFATAL_FAILURE(expect_close_with_nan(), "got NaN");
}

// A product that never writes output column 20 (of 32), in any call.
struct SkipsAColumn {
  size_t n_rows = 3, n_out = 32;
  std::string label() const { return "skips a column"; }
  std::vector<float> run(size_t, size_t nr, size_t ob, size_t oe, std::vector<float> y = {}) const {
    if (y.empty()) y = unwritten_floats(nr * n_out);
    for (size_t r = 0; r < nr; ++r) {
      for (size_t o = ob; o < oe; ++o) {
        if (o != 20) y[r * n_out + o] = static_cast<float>(o);
      }
    }
    return y;
  }
};

void invariance_of_skipping_product() {
  testing::expect_row_and_split_invariance(SkipsAColumn{}, {1, 2}, {{0, 16, 32}});
}

TEST(KernelTestUtil, RowAndSplitInvarianceFailsOnAnUnwrittenOutput) {
  EXPECT_FATAL_FAILURE(invariance_of_skipping_product(), "never written");
}

}  // namespace
}  // namespace lift::kernels
