// Known-answer blocks of IQ4_NL and the K-quant super-blocks, from
// shared/models/quantized/FORMATS.md (each checked there against ggml's own to_float), IQ4_XS's
// worked out by hand from ggml's block layout (no reference file holds one), and the
// codec table's agreement with the ggml type table.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "kernels/codec.h"
#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"
#include "test_compare.h"

namespace lift::kernels {
namespace {

std::vector<uint8_t> hex(const std::string& s) {
  std::istringstream in(s);
  std::vector<uint8_t> out;
  std::string byte;
  while (in >> byte) out.push_back(static_cast<uint8_t>(std::stoul(byte, nullptr, 16)));
  return out;
}

std::string repeat(const std::string& line, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += line + " ";
  return s;
}

std::vector<float> decode(GgmlType t, const std::vector<uint8_t>& block) {
  EXPECT_EQ(block.size(), ggml_type_info(t).block_bytes) << ggml_type_name(t);
  const size_t n = ggml_type_info(t).block_elems;
  std::vector<float> y = test::unwritten_floats(n);
  dequantize_row(t, block.data(), y.data(), n);
  return y;
}

struct Pick {
  int e;
  float y;
};
void expect_picks(const std::vector<float>& y, std::initializer_list<Pick> picks) {
  for (const Pick& p : picks) EXPECT_EQ(y[static_cast<size_t>(p.e)], p.y) << "element " << p.e;
}

const std::string kNibbles = "f0 e1 d2 c3 b4 a5 96 87 78 69 5a 4b 3c 2d 1e 0f";
const std::string kRamp = "00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff";
const std::string kKScales = "00 38 00 34 41 82 c3 c4 40 81 02 c3 41 41 50 ef";

TEST(KernelDequantK, CodecTableMatchesTypeTable) {
  int supported = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto t = static_cast<GgmlType>(id);
    const Codec* c = find_codec(t);
    EXPECT_EQ(c != nullptr, ggml_type_supported(t)) << ggml_type_name(t);
    if (c == nullptr) continue;
    ++supported;
    EXPECT_EQ(c->block_elems, ggml_type_info(t).block_elems) << ggml_type_name(t);
    EXPECT_EQ(c->block_bytes, ggml_type_info(t).block_bytes) << ggml_type_name(t);
  }
  EXPECT_EQ(supported, 15);
  EXPECT_EQ(sizeof(BlockQ8_K), ggml_type_info(GgmlType::Q8_K).block_bytes);
}

TEST(KernelDequantK, IQ4_NLKnownAnswer) {
  const auto y = decode(GgmlType::IQ4_NL, hex("00 38 " + kNibbles));
  const float want[16] = {-63.5f, -52,  -41.5f, -32.5f, -24.5f, -17.5f, -11,   -5,
                          0.5f,   6.5f, 12.5f,  19,     26.5f,  34.5f,  44.5f, 56.5f};
  for (int e = 0; e < 16; ++e) {
    EXPECT_EQ(y[e], want[e]) << e;
    EXPECT_EQ(y[16 + e], want[15 - e]) << 16 + e;
  }
}

TEST(KernelDequantK, Q4_KKnownAnswer) {
  const auto y = decode(GgmlType::Q4_K, hex(kKScales + " " + repeat(kNibbles, 8)));
  expect_picks(y, {{0, 0},
                   {1, 0.5f},
                   {15, 7.5f},
                   {16, 0},
                   {31, 7.5f},
                   {32, 14.75f},
                   {33, 13.75f},
                   {63, -0.25f},
                   {64, -0.5f},
                   {127, -0.75f},
                   {128, -5},
                   {160, 238.5f},
                   {192, -1.25f},
                   {224, 457},
                   {255, -15.5f}});
}

TEST(KernelDequantK, Q5_KKnownAnswer) {
  const auto y = decode(GgmlType::Q5_K, hex(kKScales + " " + repeat("00", 16) + " " +
                                            repeat("ff", 16) + " " + repeat(kRamp, 8)));
  expect_picks(y, {{0, 0},
                   {15, 7.5f},
                   {16, 8},
                   {31, 15.5f},
                   {32, -0.25f},
                   {63, 30.75f},
                   {64, -0.5f},
                   {128, -5},
                   {255, 961}});
}

TEST(KernelDequantK, Q6_KKnownAnswer) {
  const std::string qh = repeat("88", 16) + repeat("dd", 16);
  const auto y = decode(
      GgmlType::Q6_K,
      hex(repeat(kRamp, 8) + qh + qh + "01 ff 02 fe 03 fd 04 fc 08 f8 10 f0 20 e0 40 81 00 2c"));
  expect_picks(y, {{0, -2},
                   {1, -1.9375f},
                   {15, -1.0625f},
                   {16, 1},
                   {31, 0.0625f},
                   {32, 0},
                   {63, -3.875f},
                   {64, -6},
                   {96, 0},
                   {127, -7.75f},
                   {128, -16},
                   {200, -48},
                   {224, 0},
                   {240, -127},
                   {255, -246.0625f}});
}

TEST(KernelDequantK, Q2_KKnownAnswer) {
  const std::string qs = repeat("88", 16) + repeat("dd", 16);
  const auto y = decode(GgmlType::Q2_K, hex("01 12 23 34 45 56 67 78 89 9a ab bc cd de ef ff " +
                                            qs + qs + "00 38 00 34"));
  expect_picks(y, {{0, 0},
                   {16, 0.75f},
                   {32, 2.5f},
                   {48, 5.25f},
                   {64, -1},
                   {128, -2},
                   {240, 18.75f},
                   {255, 18.75f}});
}

TEST(KernelDequantK, Q3_KKnownAnswer) {
  const std::string qs = repeat("88", 16) + repeat("dd", 16);
  const auto y = decode(GgmlType::Q3_K, hex(repeat("cc", 32) + qs + qs +
                                            "11 ff f2 0e 05 3b da 76 ba 85 7a 85 00 34"));
  expect_picks(y, {{0, -1},
                   {16, 0.75f},
                   {32, -1},
                   {48, 0.5f},
                   {64, 0},
                   {80, -1.25f},
                   {96, 5},
                   {112, -7.5f},
                   {128, -17},
                   {176, 8},
                   {192, 0},
                   {240, 5.25f},
                   {255, 5.25f}});
}

// IQ4_XS, d = 0.5; ls = 34, 33, 31, 0, 63, 40, 16, 48 (scales 2, 1, -1, -32, 31, 8, -16, 16):
// scales_l nibbles 2 1 | 15 0 | 15 8 | 0 0, scales_h top bits 2 2 1 0 3 2 1 3 (0xdb1a). Sub-block
// k's 16 bytes are kNibbles turned left by k bytes (byte j of kNibbles: low nibble j, high
// 15 - j), so its element i < 16 is level (i + k) % 16 and i >= 16 level 15 - (i - 16 + k) % 16
// of -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113.
TEST(KernelDequantK, IQ4_XSKnownAnswer) {
  std::string qs;
  for (int k = 0; k < 8; ++k) {
    const std::string line = kNibbles + " " + kNibbles;
    qs += line.substr(3 * static_cast<size_t>(k), 3 * 16) + " ";
  }
  const auto y = decode(GgmlType::IQ4_XS, hex("00 38 1a db 12 0f 8f 00 " + qs));
  expect_picks(y,
               {{0, -127},    {5, -35},       {16, 113},  {31, -127},    {32, -52},   {39, 0.5f},
                {47, -63.5f}, {48, 44.5f},    {55, -5},   {64, 41.5f},   {96, 1040},  {111, 1328},
                {127, -1104}, {128, -759.5f}, {144, 589}, {159, 821.5f}, {160, -140}, {192, 176},
                {224, -80},   {240, 8},       {255, 104}});
}

TEST(KernelDequantK, RowsMustBeWholeSuperBlocks) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> y(512);
  try {
    dequantize_row(GgmlType::Q6_K, buf.data(), y.data(), 128);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q6_K"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lift::kernels
