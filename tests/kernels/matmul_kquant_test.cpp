// K-quant (and IQ4_XS) stored rows with Q8_K activations, and IQ4_NL rows with Q8_0 ones: on every
// Isa, each output of matmul() is bitwise the codec's scalar dot of its weight row and activation
// row (the SIMD kernels vectorize across outputs and keep the scalar float steps per output).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/act_quant.h"
#include "kernels/codec.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels {
namespace {

using testing::IsaGuard;
using testing::supported_isas;

const GgmlType kTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,  GgmlType::Q5_K,
                           GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};

// Weight rows and activation rows (the codec's format) with padded strides (the pads hold
// garbage).
struct KProblem {
  GgmlType wt;
  ActFormat af;
  size_t n_in, n_out, n_rows;
  size_t w_row_bytes, act_stride;
  std::vector<uint8_t> w, act;

  KProblem(GgmlType t, size_t in, size_t out, size_t rows)
      : wt(t),
        af(codec_of(t, "test").act),
        n_in(in),
        n_out(out),
        n_rows(rows),
        w_row_bytes(ggml_row_bytes(t, in) + 8),
        act_stride(act_row_bytes(af, in) + 12),
        w(w_row_bytes * out),
        act(act_stride * rows, 0xFF) {}

  uint8_t* wrow(size_t o) { return w.data() + o * w_row_bytes; }
  uint8_t* xrow(size_t r) { return act.data() + r * act_stride; }
  const uint8_t* wrow(size_t o) const { return w.data() + o * w_row_bytes; }
  const uint8_t* xrow(size_t r) const { return act.data() + r * act_stride; }

  std::string label(size_t ob, size_t oe) const {
    return std::string(ggml_type_name(wt)) + " isa=" + std::string(isa_name(active_isa())) +
           " n_in=" + std::to_string(n_in) + " n_out=" + std::to_string(n_out) +
           " n_rows=" + std::to_string(n_rows) + " outputs [" + std::to_string(ob) + ", " +
           std::to_string(oe) + ")";
  }

  // Runs matmul for outputs [ob, oe) and checks every output against the scalar dot, bitwise,
  // and that nothing outside the range was written.
  void expect_scalar_bits(size_t ob, size_t oe) const {
    std::vector<float> y = testing::unwritten_floats(n_rows * n_out);
    matmul(wt, w.data(), w_row_bytes, n_in, af, act.data(), act_stride, n_rows, y.data(), n_out, ob,
           oe);
    const Codec& c = codec_of(wt, "test");
    const size_t nb = n_in / c.block_elems;
    size_t wrong = 0;
    for (size_t r = 0; r < n_rows; ++r) {
      for (size_t o = 0; o < n_out; ++o) {
        const float got = y[r * n_out + o];
        if (o < ob || o >= oe) {
          EXPECT_TRUE(testing::is_unwritten(got))
              << label(ob, oe) << " wrote row " << r << " o " << o;
          continue;
        }
        const float want = c.dot(wrow(o), xrow(r), nb);
        if (std::memcmp(&got, &want, sizeof got) != 0 && wrong++ < 5) {
          ADD_FAILURE() << label(ob, oe) << " row " << r << " o " << o << ": " << got
                        << " != scalar " << want;
        }
      }
    }
    EXPECT_EQ(wrong, 0u) << label(ob, oe);
  }
};

void quantize_rows(KProblem& p, std::mt19937& rng) {
  for (size_t r = 0; r < p.n_rows; ++r) {
    const auto x = testing::random_activations(p.n_in, rng);
    quantize_activation_row(p.af, x.data(), p.n_in, p.xrow(r));
  }
}

TEST(KernelKQuantRows, EveryIsaBitwiseEqualsScalarDot) {
  IsaGuard guard;
  std::mt19937 rng(1414);
  struct Shape {
    size_t n_in, n_out, n_rows;
  };
  // Odd output counts and row counts leave partial tiles of every kind (4x1 decode tiles, 2x4
  // batch tiles, single rows and single outputs).
  const Shape shapes[] = {{256, 1, 1},  {256, 7, 1},  {512, 9, 2},   {768, 5, 3},
                          {256, 8, 4},  {512, 11, 5}, {1024, 6, 7},  {256, 13, 9},
                          {768, 3, 13}, {2048, 4, 1}, {2048, 10, 6}, {256, 17, 70}};
  for (GgmlType t : kTypes) {
    for (const Shape& s : shapes) {
      KProblem p(t, s.n_in, s.n_out, s.n_rows);
      p.w = testing::random_weights(t, s.n_out, s.n_in, 8, rng);
      p.w.resize(p.w_row_bytes * s.n_out);
      quantize_rows(p, rng);
      for (Isa isa : supported_isas()) {
        set_isa(isa);
        p.expect_scalar_bits(0, s.n_out);
        if (s.n_out > 2) p.expect_scalar_bits(1, s.n_out - 1);
      }
    }
  }
}

// f32 activations: every Isa's stored-row kernel gives the scalar kernel's bits (the scalar
// kernel here is matmul under Isa::scalar, which decodes blocks and keeps eight partial sums).
TEST(KernelKQuantRows, F32ActivationsEveryIsaMatchesScalarBitwise) {
  IsaGuard guard;
  std::mt19937 rng(1415);
  struct Shape {
    size_t n_in, n_out, n_rows;
  };
  const Shape shapes[] = {{256, 3, 1}, {512, 5, 4}, {768, 4, 6}, {256, 2, 9}};
  for (GgmlType t : kTypes) {
    for (const Shape& s : shapes) {
      const size_t w_row_bytes = ggml_row_bytes(t, s.n_in) + 8;
      const auto w = testing::random_weights(t, s.n_out, s.n_in, 8, rng);
      const size_t stride = s.n_in + 3;  // floats
      std::vector<float> x(stride * s.n_rows);
      for (size_t r = 0; r < s.n_rows; ++r) {
        const auto row = testing::random_activations(s.n_in, rng);
        std::copy(row.begin(), row.end(), x.begin() + static_cast<std::ptrdiff_t>(r * stride));
      }
      auto run = [&](Isa isa) {
        set_isa(isa);
        std::vector<float> y = testing::unwritten_floats(s.n_rows * s.n_out);
        matmul(t, w.data(), w_row_bytes, s.n_in, ActFormat::f32, x.data(), 4 * stride, s.n_rows,
               y.data(), s.n_out, 0, s.n_out);
        return y;
      };
      const auto want = run(Isa::scalar);
      for (Isa isa : supported_isas()) {
        EXPECT_TRUE(testing::same_bits(run(isa), want))
            << ggml_type_name(t) << " isa=" << isa_name(isa) << " n_in=" << s.n_in
            << " n_rows=" << s.n_rows;
      }
    }
  }
}

// Per type, the bytes of a block that hold f16 scales (d, and dmin where the type has one).
std::vector<size_t> scale_offsets(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case GgmlType::Q4_K:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case GgmlType::Q5_K:
      return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case GgmlType::IQ4_NL:
      return {offsetof(BlockIQ4_NL, d)};
    case GgmlType::IQ4_XS:
      return {offsetof(BlockIQ4_XS, d)};
    default:
      return {offsetof(BlockQ6_K, d)};
  }
}

// Activation row whose codes repeat `pattern`: Q8_K with the bsums its quantizer would store,
// or Q8_0.
void fill_codes(ActFormat af, uint8_t* dst, size_t n_in, const std::vector<int>& pattern) {
  if (af == ActFormat::q8_0) {
    for (size_t b = 0; b < n_in / kQBlock; ++b) {
      BlockQ8_0 blk{};
      blk.d = f32_to_f16(0.0123f);
      for (size_t i = 0; i < kQBlock; ++i) {
        blk.qs[i] = static_cast<int8_t>(pattern[(b * kQBlock + i) % pattern.size()]);
      }
      std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
    }
    return;
  }
  for (size_t b = 0; b < n_in / kKBlock; ++b) {
    BlockQ8_K blk{};
    blk.d = 0.0123f;
    for (size_t i = 0; i < kKBlock; ++i) {
      blk.qs[i] = static_cast<int8_t>(pattern[(b * kKBlock + i) % pattern.size()]);
    }
    for (size_t j = 0; j < 16; ++j) {
      int sum = 0;
      for (size_t i = 16 * j; i < 16 * j + 16; ++i) sum += blk.qs[i];
      blk.bsums[j] = static_cast<int16_t>(sum);
    }
    std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
  }
}

// Every code and scale byte at one value (all-ones: largest codes, Q6_K scale -1; 0x80: Q6_K
// scale -128; ...) against extreme activations (+127, -128, alternating): the largest products
// the int16 steps see, and any sign mix-up of a code bias or scale.
TEST(KernelKQuantRows, ExtremeCodesAndScalesMatchScalarDot) {
  IsaGuard guard;
  const uint8_t fills[] = {0x00, 0xFF, 0x80, 0x7F, 0xAA, 0x55, 0x3F, 0xC0};
  const std::vector<std::vector<int>> x_patterns = {
      {127}, {-128}, {127, -128}, {-128, -128, 127, 0, 5, -7}, {1}};
  const size_t n_in = 512, n_out = 5, n_rows = 5;
  for (GgmlType t : kTypes) {
    const size_t block = ggml_type_info(t).block_bytes;
    const size_t n_blocks = n_in / ggml_type_info(t).block_elems;
    for (uint8_t fill : fills) {
      KProblem p(t, n_in, n_out, n_rows);
      std::memset(p.w.data(), fill, p.w.size());
      for (size_t o = 0; o < n_out; ++o) {
        for (size_t b = 0; b < n_blocks; ++b) {
          for (size_t off : scale_offsets(t)) {
            const uint16_t h = f32_to_f16(0.001f * static_cast<float>(o + 1 + off % 3));
            std::memcpy(p.wrow(o) + b * block + off, &h, 2);
          }
        }
      }
      for (size_t r = 0; r < n_rows; ++r) fill_codes(p.af, p.xrow(r), n_in, x_patterns[r]);
      for (Isa isa : supported_isas()) {
        set_isa(isa);
        p.expect_scalar_bits(0, n_out);
      }
    }
  }
}

}  // namespace
}  // namespace lift::kernels
