#include "kernels/dequant.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"
#include "test_compare.h"

namespace lift::kernels {
namespace {

using test::unwritten_floats;

// Known-answer blocks from shared/models/quantized/FORMATS.md (checked there against ggml),
// decoded over the unwritten sentinel (a NaN, equal to no expected value).
std::vector<float> decode(GgmlType t, const std::vector<uint8_t>& block) {
  std::vector<float> y = unwritten_floats(32);
  dequantize_row(t, block.data(), y.data(), 32);
  return y;
}

TEST(KernelDequant, BlockSizesMatchTypeTable) {
  EXPECT_EQ(sizeof(BlockQ8_0), ggml_type_info(GgmlType::Q8_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_0), ggml_type_info(GgmlType::Q4_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_1), ggml_type_info(GgmlType::Q4_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_0), ggml_type_info(GgmlType::Q5_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_1), ggml_type_info(GgmlType::Q5_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_1), ggml_type_info(GgmlType::Q8_1).block_bytes);
}

TEST(KernelDequant, Q8_0KnownAnswer) {
  std::vector<uint8_t> b = {0x00, 0x38};
  for (int e = 0; e < 32; ++e) b.push_back(static_cast<uint8_t>(e - 16));
  ASSERT_EQ(b.size(), 34u);
  const auto y = decode(GgmlType::Q8_0, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.5f * static_cast<float>(e - 16)) << e;
}

TEST(KernelDequant, Q4_0KnownAnswer) {
  const std::vector<uint8_t> b = {0x00, 0x34, 0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96,
                                  0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f};
  const float want[32] = {-2,   -1.75, -1.5,  -1.25, -1,    -0.75, -0.5,  -0.25, 0,     0.25, 0.5,
                          0.75, 1,     1.25,  1.5,   1.75,  1.75,  1.5,   1.25,  1,     0.75, 0.5,
                          0.25, 0,     -0.25, -0.5,  -0.75, -1,    -1.25, -1.5,  -1.75, -2};
  const auto y = decode(GgmlType::Q4_0, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], want[e]) << e;
}

TEST(KernelDequant, Q4_1KnownAnswer) {
  const std::vector<uint8_t> b = {0x00, 0x38, 0x00, 0xbc, 0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5,
                                  0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f};
  const float want[32] = {-1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5,  6, 6.5, 6.5,
                          6,  5.5,  5, 4.5, 4, 3.5, 3, 2.5, 2, 1.5, 1, 0.5, 0, -0.5, -1};
  const auto y = decode(GgmlType::Q4_1, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], want[e]) << e;
}

TEST(KernelDequant, Q5_0KnownAnswer) {
  const std::vector<uint8_t> b = {0x00, 0x30, 0x00, 0x00, 0xff, 0xff, 0x00, 0x11, 0x22, 0x33, 0x44,
                                  0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
  const auto y = decode(GgmlType::Q5_0, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.125f * static_cast<float>(e - 16)) << e;
}

TEST(KernelDequant, Q5_1KnownAnswer) {
  const std::vector<uint8_t> b = {0x00, 0x34, 0x00, 0xc4, 0xff, 0xff, 0x00, 0x00,
                                  0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88,
                                  0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00};
  const auto y = decode(GgmlType::Q5_1, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 3.75f - 0.25f * static_cast<float>(e)) << e;
}

TEST(KernelDequant, FloatTypes) {
  // Each output exactly as long as its row.
  const std::vector<uint16_t> h = {0x3C00, 0xC000, 0x0001, 0x7C00};
  std::vector<float> y = unwritten_floats(4);
  dequantize_row(GgmlType::F16, h.data(), y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{1.0f, -2.0f, 0x1p-24f, f16_to_f32(0x7C00)}));
  const std::vector<uint16_t> b = {0x3F80, 0xC040, 0x0000};
  std::vector<float> yb = unwritten_floats(3);
  dequantize_row(GgmlType::BF16, b.data(), yb.data(), 3);
  EXPECT_EQ(yb, (std::vector<float>{1.0f, -3.0f, 0.0f}));
  const std::vector<float> f = {1.5f, -7.25f, 3.0f};
  std::vector<float> yf = unwritten_floats(3);
  dequantize_row(GgmlType::F32, f.data(), yf.data(), 3);
  EXPECT_EQ(yf, f);
}

// Multi-block rows: each block decodes independently with its own scale.
TEST(KernelDequant, MultiBlockRow) {
  std::vector<uint8_t> row(2 * 34);
  const uint16_t d0 = f32_to_f16(0.5f), d1 = f32_to_f16(-2.0f);
  std::memcpy(row.data(), &d0, 2);
  std::memcpy(row.data() + 34, &d1, 2);
  for (int i = 0; i < 32; ++i) {
    row[2 + i] = static_cast<uint8_t>(i);
    row[36 + i] = static_cast<uint8_t>(-i);
  }
  std::vector<float> y = unwritten_floats(64);
  dequantize_row(GgmlType::Q8_0, row.data(), y.data(), 64);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(y[i], 0.5f * static_cast<float>(i));
    EXPECT_EQ(y[32 + i], 2.0f * static_cast<float>(i));
  }
}

TEST(KernelDequant, UnsupportedTypeThrowsWithName) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> y(256);
  try {
    dequantize_row(GgmlType::IQ2_XXS, buf.data(), y.data(), 256);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize_row(GgmlType::Q4_0, buf.data(), y.data(), 33), std::invalid_argument);
}

}  // namespace
}  // namespace lift::kernels
