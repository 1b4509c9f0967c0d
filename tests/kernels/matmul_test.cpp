#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/act_quant.h"

namespace lift::kernels {
namespace {

using testing::IsaGuard;
using testing::supported_isas;

struct Pair {
  GgmlType wt;
  ActFormat af;
};

const Pair kPairs[] = {
    {GgmlType::F32, ActFormat::f32},
    {GgmlType::F16, ActFormat::f32},
    {GgmlType::BF16, ActFormat::f32},
    {GgmlType::Q8_0, ActFormat::f32},
    {GgmlType::Q4_0, ActFormat::f32},
    {GgmlType::Q5_0, ActFormat::f32},
    {GgmlType::Q4_1, ActFormat::f32},
    {GgmlType::Q5_1, ActFormat::f32},
    {GgmlType::Q8_0, ActFormat::q8_0},
    {GgmlType::Q4_0, ActFormat::q8_0},
    {GgmlType::Q5_0, ActFormat::q8_0},
    {GgmlType::Q4_1, ActFormat::q8_1},
    {GgmlType::Q5_1, ActFormat::q8_1},
    // IQ4_NL and the K-quants: stored rows (AVX2 kernels bitwise equal to the scalar ones).
    {GgmlType::IQ4_NL, ActFormat::q8_0},
    {GgmlType::IQ4_NL, ActFormat::f32},
    {GgmlType::Q2_K, ActFormat::q8_k},
    {GgmlType::Q3_K, ActFormat::q8_k},
    {GgmlType::Q4_K, ActFormat::q8_k},
    {GgmlType::Q5_K, ActFormat::q8_k},
    {GgmlType::Q6_K, ActFormat::q8_k},
    {GgmlType::Q4_K, ActFormat::f32},
    {GgmlType::Q6_K, ActFormat::f32},
    {GgmlType::IQ4_XS, ActFormat::q8_k},
    {GgmlType::IQ4_XS, ActFormat::f32},
};

bool super_blocks(GgmlType t) { return ggml_type_info(t).block_elems == 256; }

std::string label(const Pair& p, Isa isa, size_t n_in) {
  const char* af = p.af == ActFormat::f32    ? "f32"
                   : p.af == ActFormat::q8_0 ? "q8_0"
                   : p.af == ActFormat::q8_1 ? "q8_1"
                                             : "q8_k";
  return std::string(ggml_type_name(p.wt)) + "x" + af + " isa=" + std::string(isa_name(isa)) +
         " n_in=" + std::to_string(n_in);
}

bool float_weights(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

// A weight matrix and a batch of activation rows, both with padded strides so that the kernels
// must honour w_row_bytes and act_stride. The gaps between activation rows hold 0xFF bytes (a
// NaN as f32 or as an f16 scale), so a kernel reading one fails; both buffers end with their
// last row, so AddressSanitizer sees a read past it.
struct Problem {
  Pair pair;
  size_t n_in, n_out, n_rows;
  size_t w_row_bytes, act_stride;
  std::vector<uint8_t> w;
  std::vector<uint8_t> act;

  Problem(Pair p, size_t in, size_t out, size_t rows, std::mt19937& rng)
      : pair(p), n_in(in), n_out(out), n_rows(rows) {
    const size_t pad = 8;
    w_row_bytes = ggml_row_bytes(p.wt, n_in) + pad;
    w = testing::random_weights(p.wt, n_out, n_in, pad, rng);
    act_stride = act_row_bytes(p.af, n_in) + 12;
    act.assign(testing::strided_rows_bytes(rows, act_stride, act_row_bytes(p.af, n_in)), 0xFF);
    for (size_t r = 0; r < rows; ++r) {
      const auto x = testing::random_activations(n_in, rng);
      quantize_activation_row(p.af, x.data(), n_in, act.data() + r * act_stride);
    }
  }

  const uint8_t* row(size_t r) const { return act.data() + r * act_stride; }

  // y for rows [r0, r0 + nr) of this batch (or of `src` rows), columns [ob, oe), ldy = n_out.
  std::vector<float> run(const uint8_t* src, size_t nr, size_t ob, size_t oe,
                         std::vector<float> y = {}) const {
    if (y.empty()) y = testing::unwritten_floats(nr * n_out);
    matmul(pair.wt, w.data(), w_row_bytes, n_in, pair.af, src, act_stride, nr, y.data(), n_out, ob,
           oe);
    return y;
  }
  std::vector<float> reference() const {
    std::vector<float> y = testing::unwritten_floats(n_rows * n_out);
    matmul_reference(pair.wt, w.data(), w_row_bytes, n_in, pair.af, act.data(), act_stride, n_rows,
                     y.data(), n_out, 0, n_out);
    return y;
  }
};

TEST(KernelMatmul, MatchesReference) {
  IsaGuard guard;
  std::mt19937 rng(42);
  for (const Pair& p : kPairs) {
    std::vector<size_t> n_ins = {32, 64, 96, 4128};
    if (float_weights(p.wt)) n_ins.insert(n_ins.end(), {1, 7, 15, 17, 33, 100, 4099});
    if (super_blocks(p.wt)) n_ins = {256, 768, 4096};
    for (size_t n_in : n_ins) {
      const size_t n_out = 19;  // not a multiple of any tile width
      const size_t max_rows = n_in > 1000 ? 9 : 17;
      Problem prob(p, n_in, n_out, max_rows, rng);
      const auto ref = prob.reference();
      for (Isa isa : supported_isas()) {
        set_isa(isa);
        for (size_t nr = 1; nr <= max_rows; nr += (nr < 9 ? 1 : 4)) {
          const auto y = prob.run(prob.act.data(), nr, 0, n_out);
          testing::expect_close(y, ref, nr, n_out,
                                label(p, isa, n_in) + " n_rows=" + std::to_string(nr));
        }
      }
    }
  }
}

// The large shape exercises long accumulations and many row blocks in one call.
TEST(KernelMatmul, MatchesReferencePrefillShape) {
  IsaGuard guard;
  std::mt19937 rng(5);
  for (const Pair& p : {kPairs[1], kPairs[4], kPairs[9], kPairs[11]}) {
    Problem prob(p, 512, 37, 150, rng);
    const auto ref = prob.reference();
    for (Isa isa : supported_isas()) {
      set_isa(isa);
      testing::expect_close(prob.run(prob.act.data(), prob.n_rows, 0, prob.n_out), ref, prob.n_rows,
                            prob.n_out, label(p, isa, prob.n_in));
    }
  }
}

using testing::same_bits;

// y[r][o] may not depend on which rows share the call, on r's position, or on the column split.
TEST(KernelMatmul, BatchAndSplitInvariantBitwise) {
  IsaGuard guard;
  std::mt19937 rng(99);
  for (const Pair& p : kPairs) {
    std::vector<size_t> n_ins = {32, 96, 1056};
    if (float_weights(p.wt)) n_ins.push_back(75);
    if (super_blocks(p.wt)) n_ins = {256, 1280};
    for (size_t n_in : n_ins) {
      const size_t n_out = 23, n_rows = 17;
      Problem prob(p, n_in, n_out, n_rows, rng);
      for (Isa isa : supported_isas()) {
        set_isa(isa);
        const std::string what = label(p, isa, n_in);
        const auto full = prob.run(prob.act.data(), n_rows, 0, n_out);
        // Each row alone.
        for (size_t r = 0; r < n_rows; ++r) {
          const auto one = prob.run(prob.row(r), 1, 0, n_out);
          ASSERT_TRUE(same_bits(one.data(), &full[r * n_out], n_out)) << what << " row " << r;
        }
        // Rows in groups of varying size, so each row lands at various tile positions.
        for (size_t g : {2u, 3u, 5u, 6u, 7u, 9u}) {
          for (size_t r0 = 0; r0 < n_rows; r0 += g) {
            const size_t nr = std::min(g, n_rows - r0);
            const auto part = prob.run(prob.row(r0), nr, 0, n_out);
            ASSERT_TRUE(same_bits(part.data(), &full[r0 * n_out], nr * n_out))
                << what << " group " << g << " at " << r0;
          }
        }
        // Rows in reverse order (different companions and positions); the row bytes only, as
        // the last row of the batch has nothing after it.
        std::vector<uint8_t> rev(prob.act.size(), 0xFF);
        for (size_t r = 0; r < n_rows; ++r) {
          std::memcpy(rev.data() + r * prob.act_stride, prob.row(n_rows - 1 - r),
                      act_row_bytes(p.af, n_in));
        }
        const auto yr = prob.run(rev.data(), n_rows, 0, n_out);
        for (size_t r = 0; r < n_rows; ++r) {
          ASSERT_TRUE(same_bits(&yr[r * n_out], &full[(n_rows - 1 - r) * n_out], n_out))
              << what << " reversed row " << r;
        }
        // Output columns split as threads would, with ragged edges.
        for (const std::vector<size_t>& cuts :
             {std::vector<size_t>{0, 1, 2, 3, 23}, {0, 5, 6, 13, 23}, {0, 11, 23}, {0, 22, 23}}) {
          std::vector<float> y = testing::unwritten_floats(n_rows * n_out);
          for (size_t c = 0; c + 1 < cuts.size(); ++c) {
            y = prob.run(prob.act.data(), n_rows, cuts[c], cuts[c + 1], std::move(y));
          }
          ASSERT_TRUE(same_bits(y.data(), full.data(), y.size())) << what << " split";
        }
      }
    }
  }
}

// Columns [2, 7) get what the whole product gives them; the others keep their old values.
TEST(KernelMatmul, WritesOnlyItsRange) {
  IsaGuard guard;
  std::mt19937 rng(3);
  for (const Pair& p : {kPairs[0], kPairs[9]}) {
    Problem prob(p, 64, 10, 3, rng);
    for (Isa isa : supported_isas()) {
      set_isa(isa);
      const auto full = prob.run(prob.act.data(), 3, 0, 10);
      std::vector<float> y(3 * 10, -7.0f);
      y = prob.run(prob.act.data(), 3, 2, 7, std::move(y));
      for (size_t r = 0; r < 3; ++r) {
        for (size_t o = 0; o < 10; ++o) {
          if (o < 2 || o >= 7) {
            EXPECT_EQ(y[r * 10 + o], -7.0f) << isa_name(isa) << " wrote outside at " << o;
          } else {
            EXPECT_TRUE(same_bits(&y[r * 10 + o], &full[r * 10 + o], 1))
                << isa_name(isa) << " row " << r << " output " << o;
          }
        }
      }
    }
  }
}

TEST(KernelMatmul, RejectsUnsupportedPairs) {
  std::vector<uint8_t> w(4096), act(4096);
  std::vector<float> y(16);
  auto call = [&](GgmlType wt, ActFormat af, size_t n_in) {
    matmul(wt, w.data(), 1024, n_in, af, act.data(), 1024, 1, y.data(), 16, 0, 1);
  };
  EXPECT_THROW(call(GgmlType::Q4_0, ActFormat::q8_1, 64), std::invalid_argument);
  EXPECT_THROW(call(GgmlType::Q4_1, ActFormat::q8_0, 64), std::invalid_argument);
  EXPECT_THROW(call(GgmlType::F16, ActFormat::q8_0, 64), std::invalid_argument);
  EXPECT_THROW(call(GgmlType::IQ2_XXS, ActFormat::f32, 256), std::invalid_argument);
  EXPECT_THROW(call(GgmlType::Q4_K, ActFormat::q8_0, 256), std::invalid_argument);
  EXPECT_THROW(call(GgmlType::Q6_K, ActFormat::q8_k, 128), std::invalid_argument);
  EXPECT_THROW(call(GgmlType::IQ4_NL, ActFormat::q8_k, 256), std::invalid_argument);
  EXPECT_THROW(call(GgmlType::Q8_0, ActFormat::f32, 48), std::invalid_argument);
  EXPECT_THROW(matmul(GgmlType::F32, w.data(), 8, 64, ActFormat::f32, act.data(), 256, 1, y.data(),
                      16, 0, 1),
               std::invalid_argument);  // row stride shorter than a row
  try {
    call(GgmlType::IQ3_S, ActFormat::f32, 256);
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("IQ3_S"), std::string::npos);
  }
}

TEST(KernelIsa, SelectionAndNames) {
  IsaGuard guard;
  EXPECT_LE(active_isa(), best_isa());
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    EXPECT_EQ(active_isa(), isa);
    EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  }
  if (best_isa() < Isa::avx512) {
    EXPECT_THROW(set_isa(Isa::avx512), std::invalid_argument);
  }
  EXPECT_FALSE(parse_isa("sse9").has_value());
}

}  // namespace
}  // namespace lift::kernels
