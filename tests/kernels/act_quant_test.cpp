#include "kernels/act_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels {
namespace {

using testing::IsaGuard;
using testing::supported_isas;

TEST(KernelActQuant, FormatForWeightType) {
  EXPECT_EQ(act_format(GgmlType::Q8_0, true), ActFormat::q8_0);
  EXPECT_EQ(act_format(GgmlType::Q4_0, true), ActFormat::q8_0);
  EXPECT_EQ(act_format(GgmlType::Q5_0, true), ActFormat::q8_0);
  EXPECT_EQ(act_format(GgmlType::Q4_1, true), ActFormat::q8_1);
  EXPECT_EQ(act_format(GgmlType::Q5_1, true), ActFormat::q8_1);
  EXPECT_EQ(act_format(GgmlType::F32, true), ActFormat::f32);
  EXPECT_EQ(act_format(GgmlType::F16, true), ActFormat::f32);
  EXPECT_EQ(act_format(GgmlType::BF16, true), ActFormat::f32);
  EXPECT_EQ(act_format(GgmlType::Q4_0, false), ActFormat::f32);
  EXPECT_EQ(act_format(GgmlType::Q5_1, false), ActFormat::f32);
  EXPECT_EQ(act_format(GgmlType::IQ4_NL, true), ActFormat::q8_0);
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::IQ4_XS}) {
    EXPECT_EQ(act_format(t, true), ActFormat::q8_k) << ggml_type_name(t);
    EXPECT_EQ(act_format(t, false), ActFormat::f32) << ggml_type_name(t);
  }
  EXPECT_THROW(act_format(GgmlType::IQ2_XXS, true), std::invalid_argument);
}

TEST(KernelActQuant, RowBytes) {
  EXPECT_EQ(act_row_bytes(ActFormat::f32, 33), 132u);
  EXPECT_EQ(act_row_bytes(ActFormat::q8_0, 64), 68u);
  EXPECT_EQ(act_row_bytes(ActFormat::q8_1, 64), 72u);
  EXPECT_THROW(act_row_bytes(ActFormat::q8_0, 48), std::invalid_argument);
  EXPECT_EQ(act_row_bytes(ActFormat::q8_k, 512), 584u);
  EXPECT_THROW(act_row_bytes(ActFormat::q8_k, 224), std::invalid_argument);
}

// The row's bytes, every one of them written (testing::written_bytes): a zero block is only
// checked if the quantizer really stored its zeros.
std::vector<uint8_t> quantize(ActFormat af, const std::vector<float>& x) {
  return testing::written_bytes(act_row_bytes(af, x.size()), [&](uint8_t* dst) {
    quantize_activation_row(af, x.data(), x.size(), dst);
  });
}

// With amax = 127 the inverse scale is exactly 1, so x*id = x and the .5 cases are true ties.
TEST(KernelActQuant, RoundsHalfToEven) {
  IsaGuard guard;
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  const float ties[] = {0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f, -3.5f, 126.5f, -126.5f};
  const int want[] = {0, 2, 2, 4, 0, -2, -2, -4, 126, -126};
  for (size_t i = 0; i < std::size(ties); ++i) x[1 + i] = ties[i];
  x[20] = 2.5000002f;  // just above a tie
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    const auto q = quantize(ActFormat::q8_0, x);
    BlockQ8_0 b;
    std::memcpy(&b, q.data(), sizeof b);
    EXPECT_EQ(b.d, 0x3C00) << isa_name(isa);  // 127/127 = 1.0
    EXPECT_EQ(b.qs[0], 127);
    for (size_t i = 0; i < std::size(ties); ++i) EXPECT_EQ(b.qs[1 + i], want[i]) << ties[i];
    EXPECT_EQ(b.qs[20], 3);
  }
}

TEST(KernelActQuant, ZeroBlockHasZeroScaleAndCodes) {
  IsaGuard guard;
  std::vector<float> x(64, 0.0f);
  x[5] = -0.0f;
  x[40] = 1.0f;  // second block nonzero
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    const auto q = quantize(ActFormat::q8_1, x);
    BlockQ8_1 b[2];
    std::memcpy(b, q.data(), sizeof b);
    EXPECT_EQ(b[0].d, 0);
    EXPECT_EQ(b[0].s, 0);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(b[0].qs[i], 0);
    EXPECT_EQ(b[1].d, f32_to_f16(1.0f / 127.0f));
    EXPECT_EQ(b[1].qs[8], 127);
    EXPECT_EQ(b[1].s, f32_to_f16(1.0f / 127.0f * 127.0f));
  }
}

// The inverse scale is 127/amax in f32, not 1/f16(d): here the two give different codes.
TEST(KernelActQuant, UsesF32InverseScaleAndStoresSum) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.37f * static_cast<float>(i - 13) + 0.011f;
  const auto q = quantize(ActFormat::q8_1, x);
  BlockQ8_1 b;
  std::memcpy(&b, q.data(), sizeof b);
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float d = amax / 127.0f;
  const float id = 127.0f / amax;
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const int want = static_cast<int>(std::nearbyint(x[i] * id));
    EXPECT_EQ(b.qs[i], want) << i;
    sum += want;
  }
  EXPECT_EQ(b.d, f32_to_f16(d));
  EXPECT_EQ(b.s, f32_to_f16(d * static_cast<float>(sum)));
}

// The SIMD quantizers must give the scalar blocks byte for byte.
TEST(KernelActQuant, AllIsasBitIdentical) {
  IsaGuard guard;
  std::mt19937 rng(7);
  for (size_t n : {32u, 96u, 4128u}) {
    auto x = testing::random_activations(n, rng);
    x[3] = 0x1p-140f;  // subnormal input
    if (n > 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
    for (ActFormat af : {ActFormat::q8_0, ActFormat::q8_1}) {
      set_isa(Isa::scalar);
      const auto want = quantize(af, x);
      for (Isa isa : supported_isas()) {
        set_isa(isa);
        EXPECT_EQ(quantize(af, x), want) << isa_name(isa) << " n=" << n;
      }
    }
  }
  // Q8_K: a zero block, a block whose largest |x| first occurs negated (later +max must not
  // win), ties at the cap, and random blocks.
  auto x = testing::random_activations(1024, rng);
  std::fill(x.begin(), x.begin() + 256, 0.0f);
  x[256 + 40] = -9.0f;
  x[256 + 200] = 9.0f;
  x[512 + 7] = 0x1p-140f;
  set_isa(Isa::scalar);
  const auto want = quantize(ActFormat::q8_k, x);
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    EXPECT_EQ(quantize(ActFormat::q8_k, x), want) << isa_name(isa);
  }
}

// Q8_K as ggml's quantize_row_q8_K: the scale comes from the first value of largest |x| with
// its sign (iscale = -127 / x_max, so codes flip sign when it is positive), codes round half
// to even and are capped at 127, d = 1 / iscale in f32, and bsums hold each 16 codes' sum.
void check_q8_k_rule() {
  std::vector<float> x(512, 0.0f);
  // Block 0: x_max = -127 (index 3; the later +127 does not replace it), iscale = 1.
  x[3] = -127.0f;
  x[7] = 127.0f;
  x[20] = 2.5f;   // tie: 2
  x[21] = -3.5f;  // tie: -4
  // Block 1: x_max = +64, iscale = -127/64: codes of the opposite sign.
  x[256] = 64.0f;
  x[257] = -64.0f;
  x[258] = 32.0f;
  const auto q = quantize(ActFormat::q8_k, x);
  BlockQ8_K b[2];
  std::memcpy(b, q.data(), sizeof b);
  EXPECT_EQ(b[0].d, 1.0f);
  EXPECT_EQ(b[0].qs[3], -127);
  EXPECT_EQ(b[0].qs[7], 127);
  EXPECT_EQ(b[0].qs[20], 2);
  EXPECT_EQ(b[0].qs[21], -4);
  EXPECT_EQ(b[0].bsums[0], 0);  // -127 + 127
  EXPECT_EQ(b[0].bsums[1], -2);
  const float iscale = -127.0f / 64.0f;
  EXPECT_EQ(b[1].d, 1.0f / iscale);
  EXPECT_EQ(b[1].qs[0], -127);
  EXPECT_EQ(b[1].qs[1], 127);
  EXPECT_EQ(b[1].qs[2], static_cast<int8_t>(std::lrint(iscale * 32.0f)));
  EXPECT_EQ(b[1].bsums[0], b[1].qs[2]);
  // An all-zero block: d = 0, zero codes and sums.
  const auto z = quantize(ActFormat::q8_k, std::vector<float>(256, 0.0f));
  EXPECT_EQ(z, std::vector<uint8_t>(sizeof(BlockQ8_K), 0));
}

TEST(KernelActQuant, Q8_KMatchesGgmlRule) {
  IsaGuard guard;
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    check_q8_k_rule();
  }
}

}  // namespace
}  // namespace lift::kernels
