#include "kernels/fp16.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "kernels/isa.h"

namespace lift::kernels {
namespace {

// The F16C instructions are the hardware ground truth for IEEE half rounding.
__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) {
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT);
  return static_cast<uint16_t>(_mm_cvtsi128_si32(h) & 0xFFFF);
}
__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
// Every Isa above scalar requires F16C.
bool have_f16c() { return best_isa() >= Isa::avx2; }

TEST(KernelFp16, KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x3800), 0.5f);
  EXPECT_EQ(f16_to_f32(0xBC00), -1.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), 0x1p-14f);  // smallest normal
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_f32(0x8000)), 0x80000000u);
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));

  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // midpoint to 2^16 rounds to even = inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);         // tie between 0 and 1 ulp: even is 0
  EXPECT_EQ(f32_to_f16(0x1.8p-24f), 0x0002);       // tie between 1 and 2: even is 2
  EXPECT_EQ(f32_to_f16(0x1.000002p-25f), 0x0001);  // just above the tie
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3C00);    // tie, mantissa even: down
  EXPECT_EQ(f32_to_f16(1.0f + 0x1.8p-10f), 0x3C02);  // tie, mantissa odd: up
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7E00, 0x7E00);
}

TEST(KernelFp16, F16ToF32MatchesHardwareForEveryHalf) {
  if (!have_f16c()) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(f16_to_f32(hh)), std::bit_cast<uint32_t>(hw_f16_to_f32(hh)))
        << std::hex << h;
  }
}

TEST(KernelFp16, F16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (nan) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(hh)), hh) << std::hex << h;
  }
}

TEST(KernelFp16, F32ToF16MatchesHardware) {
  if (!have_f16c()) GTEST_SKIP() << "no F16C";
  // Random bit patterns cover NaN payloads and huge values; the exponent sweep concentrates on
  // the range where halves are normal or subnormal, with all rounding cases.
  std::mt19937 rng(1234);
  for (int i = 0; i < 2000000; ++i) {
    auto bits = static_cast<uint32_t>(rng());
    if (i % 2 == 1) bits = (bits & 0x807FFFFFu) | ((100u + bits % 48u) << 23);
    const float f = std::bit_cast<float>(bits);
    ASSERT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << std::hex << bits;
  }
}

TEST(KernelFp16, Bf16) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
  EXPECT_EQ(bf16_to_f32(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between bf16 1.0 (even) and 1.0078125: down. 1 + 3*2^-8 ties up.
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x3p-8f), 0x3F82);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1.2p-8f), 0x3F81);                   // above the tie
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7F7F8000u)), 0x7F80);  // tie above max: inf
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(f32_to_bf16(0x1p-130f), 0x0008);  // subnormals are rounded, not flushed
  const uint16_t nan = f32_to_bf16(std::bit_cast<float>(0x7F800001u));
  EXPECT_TRUE(std::isnan(bf16_to_f32(nan)));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto bb = static_cast<uint16_t>(b);
    if (std::isnan(bf16_to_f32(bb))) continue;
    ASSERT_EQ(f32_to_bf16(bf16_to_f32(bb)), bb);
  }
}

}  // namespace
}  // namespace lift::kernels
