#include "kernels/panel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/act_quant.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels {
namespace {

using testing::IsaGuard;

const GgmlType kTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::IQ4_NL,
                           GgmlType::F16,  GgmlType::BF16, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};

// Input widths for a type: K panels need whole 256-element super-blocks.
std::vector<size_t> widths(GgmlType t, std::vector<size_t> n_ins) {
  if (is_k_panel(t)) return {256, 512, 4096};
  return n_ins;
}

// A packed matrix and a batch of activation rows (strides padded, as the engine's may be; the
// gaps hold 0xFF bytes, NaN to a kernel that reads them, and the last row ends the buffer).
struct PanelProblem {
  GgmlType wt;
  ActFormat af;
  size_t n_in, n_out, n_rows, w_row_bytes, act_stride;
  std::vector<uint8_t> w, act;
  std::vector<ActBlockInfo> info;
  PanelMatrix pm;

  PanelProblem(GgmlType t, size_t in, size_t out, size_t rows, std::mt19937& rng)
      : wt(t),
        af(is_k_panel(t)     ? ActFormat::q8_k
           : is_quantized(t) ? ActFormat::q8_0
                             : ActFormat::f32),
        n_in(in),
        n_out(out),
        n_rows(rows) {
    w_row_bytes = ggml_row_bytes(t, n_in) + 6;
    w = testing::random_weights(t, n_out, n_in, 6, rng);
    act_stride = act_row_bytes(af, n_in) + 8;
    act.assign(testing::strided_rows_bytes(rows, act_stride, act_row_bytes(af, n_in)), 0xFF);
    if (af == ActFormat::q8_0) info.resize(rows * n_in / 32);
    for (size_t r = 0; r < rows; ++r) {
      const auto x = testing::random_activations(n_in, rng);
      quantize_activation_row(af, x.data(), n_in, act.data() + r * act_stride);
      if (af == ActFormat::q8_0) act_block_info(row(r), n_in, info.data() + r * n_in / 32);
    }
    pm = pack_panels(t, w.data(), w_row_bytes, n_in, n_out);
  }
  const uint8_t* row(size_t r) const { return act.data() + r * act_stride; }
  const ActBlockInfo* row_info(size_t r) const {
    return info.empty() ? nullptr : info.data() + r * n_in / 32;
  }

  std::vector<float> run(size_t r0, size_t nr, size_t ob, size_t oe,
                         std::vector<float> y = {}) const {
    if (y.empty()) y = testing::unwritten_floats(nr * n_out);
    matmul_panels(pm, row(r0), act_stride, row_info(r0), nr, y.data(), n_out, ob, oe);
    return y;
  }
  std::vector<float> reference() const {
    std::vector<float> y = testing::unwritten_floats(n_rows * n_out);
    matmul_reference(wt, w.data(), w_row_bytes, n_in, af, act.data(), act_stride, n_rows, y.data(),
                     n_out, 0, n_out);
    return y;
  }
  std::string label() const {
    return std::string(ggml_type_name(wt)) + " n_in=" + std::to_string(n_in) +
           " n_out=" + std::to_string(n_out);
  }
};

// Whether the best Isa has panel kernels for t (AVX2 has them for the K types only).
bool have_panels(GgmlType t) {
  set_isa(best_isa());
  return panel_supported(t);
}
bool have_panels() {
  for (GgmlType t : kTypes) {
    if (have_panels(t)) return true;
  }
  return false;
}

TEST(KernelPanel, PackRoundTripsEveryRow) {
  std::mt19937 rng(7);
  for (GgmlType t : kTypes) {
    if (is_k_panel(t)) continue;  // K panels hold decoded scales (checked against the reference)
    for (size_t n_out : {1u, 16u, 21u, 50u}) {
      const size_t n_in = 96;
      const size_t row_bytes = ggml_row_bytes(t, n_in) + 3;
      const auto w = testing::random_weights(t, n_out, n_in, 3, rng);
      const PanelMatrix pm = pack_panels(t, w.data(), row_bytes, n_in, n_out);
      EXPECT_EQ(pm.n_panels(), (n_out + 15) / 16);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(pm.data.get()) % 64, 0u);
      for (size_t o = 0; o < n_out; ++o) {
        const auto back = testing::written_bytes(
            ggml_row_bytes(t, n_in), [&](uint8_t* dst) { unpack_panel_row(pm, o, dst); });
        ASSERT_EQ(std::memcmp(back.data(), w.data() + o * row_bytes, back.size()), 0)
            << ggml_type_name(t) << " row " << o;
      }
    }
  }
}

TEST(KernelPanel, ActBlockInfoIsScaleAndOffsetCorrection) {
  std::mt19937 rng(8);
  const auto x = testing::random_activations(128, rng);
  const auto q = testing::written_bytes(act_row_bytes(ActFormat::q8_0, 128), [&](uint8_t* dst) {
    quantize_activation_row(ActFormat::q8_0, x.data(), 128, dst);
  });
  std::vector<ActBlockInfo> info(4, ActBlockInfo{testing::unwritten(), INT32_MIN});
  act_block_info(q.data(), 128, info.data());
  for (size_t b = 0; b < 4; ++b) {
    BlockQ8_0 blk;
    std::memcpy(&blk, q.data() + b * sizeof blk, sizeof blk);
    int sum = 0;
    for (int8_t c : blk.qs) sum += c;
    EXPECT_EQ(info[b].bias, -128 * sum);
    EXPECT_EQ(info[b].d, f16_to_f32(blk.d));
  }
}

TEST(KernelPanel, RejectsWhatItCannotPack) {
  std::vector<uint8_t> w(1024);
  EXPECT_THROW(pack_panels(GgmlType::Q5_1, w.data(), 24, 32, 1), std::invalid_argument);
  EXPECT_THROW(pack_panels(GgmlType::Q8_0, w.data(), 34, 33, 1), std::invalid_argument);
  EXPECT_THROW(pack_panels(GgmlType::Q4_K, w.data(), 144, 128, 1), std::invalid_argument);
  EXPECT_THROW(pack_panels(GgmlType::F16, w.data(), 2, 32, 1), std::invalid_argument);
  EXPECT_THROW(pack_panels(GgmlType::F16, w.data(), 64, 32, 0), std::invalid_argument);
}

TEST(KernelPanel, MatchesReference) {
  IsaGuard guard;
  if (!have_panels()) GTEST_SKIP() << "no panel kernels on this CPU";
  std::mt19937 rng(42);
  for (GgmlType t : kTypes) {
    if (!have_panels(t)) continue;
    std::vector<size_t> n_ins = {32, 64, 96, 4128};
    if (!is_quantized(t)) n_ins.insert(n_ins.end(), {1, 7, 17, 100, 4099});
    for (size_t n_in : widths(t, n_ins)) {
      for (size_t n_out : {5u, 16u, 37u, 130u}) {
        const size_t max_rows = n_in > 1000 ? 9 : 21;
        PanelProblem prob(t, n_in, n_out, max_rows, rng);
        const auto ref = prob.reference();
        // Quantized panels in both layouts (the split one is AMX's for K panels).
        for (const bool split : {false, true}) {
          if (split && !is_quantized(t)) continue;
          if (split) {
            prob.pm =
                pack_panels(t, prob.w.data(), prob.w_row_bytes, n_in, n_out, PanelLayout::split);
            ASSERT_FALSE(prob.pm.streamed);
          }
          for (size_t nr = 1; nr <= max_rows; nr += (nr < 9 ? 1 : 4)) {
            testing::expect_close(
                prob.run(0, nr, 0, n_out), ref, nr, n_out,
                prob.label() + (split ? " split" : "") + " rows " + std::to_string(nr));
          }
        }
      }
    }
  }
}

// Prefill-sized batches cross row blocks and use the wide tiles.
TEST(KernelPanel, MatchesReferencePrefillShape) {
  IsaGuard guard;
  if (!have_panels()) GTEST_SKIP() << "no panel kernels on this CPU";
  std::mt19937 rng(5);
  for (GgmlType t : kTypes) {
    if (!have_panels(t)) continue;
    PanelProblem prob(t, is_k_panel(t) ? 1024 : 512, 70, 150, rng);
    const auto ref = prob.reference();
    testing::expect_close(prob.run(0, prob.n_rows, 0, prob.n_out), ref, prob.n_rows, prob.n_out,
                          prob.label());
  }
}

// A row's outputs do not depend on its companions, its place in the batch, or the column split.
TEST(KernelPanel, BatchAndSplitInvariantBitwise) {
  IsaGuard guard;
  if (!have_panels()) GTEST_SKIP() << "no panel kernels on this CPU";
  std::mt19937 rng(99);
  for (GgmlType t : kTypes) {
    if (!have_panels(t)) continue;
    for (size_t n_in : widths(t, {32u, 96u, 1056u})) {
      const size_t n_out = 77, n_rows = 70;
      PanelProblem prob(t, n_in, n_out, n_rows, rng);
      testing::expect_row_and_split_invariance(prob, {1, 2, 3, 5, 8, 13, 64},
                                               {{0, 16, 32, 48, 64, 77}, {0, 64, 77}, {0, 32, 77}});
    }
  }
}

// The largest codes and scales everywhere (every byte but d and dmin 0xFF) against activations
// of -127 throughout (Q8_K is symmetric): the int16 sums the AVX2 kernel adds before widening
// come within 1% of their bound.
void saturate(PanelProblem& p) {
  const size_t nb = p.n_in / kKBlock, bytes = ggml_type_info(p.wt).block_bytes;
  const size_t d_off = p.wt == GgmlType::Q6_K   ? offsetof(BlockQ6_K, d)
                       : p.wt == GgmlType::Q3_K ? offsetof(BlockQ3_K, d)
                       : p.wt == GgmlType::Q2_K ? offsetof(BlockQ2_K, d)
                                                : 0;
  const size_t d_len = p.wt == GgmlType::Q6_K || p.wt == GgmlType::Q3_K || p.wt == GgmlType::IQ4_XS
                           ? 2
                           : 4;  // Q4_K/Q5_K: d, dmin
  for (size_t o = 0; o < p.n_out; ++o) {
    for (size_t b = 0; b < nb; ++b) {
      uint8_t* blk = p.w.data() + o * p.w_row_bytes + b * bytes;
      uint8_t keep[4];
      std::memcpy(keep, blk + d_off, d_len);
      std::memset(blk, 0xFF, bytes);
      std::memcpy(blk + d_off, keep, d_len);
    }
  }
  const std::vector<float> x(p.n_in, -1.0f);
  for (size_t r = 0; r < p.n_rows; ++r) {
    quantize_activation_row(p.af, x.data(), p.n_in, p.act.data() + r * p.act_stride);
  }
  p.pm = pack_panels(p.wt, p.w.data(), p.w_row_bytes, p.n_in, p.n_out);
  EXPECT_EQ(static_cast<int8_t>(p.row(0)[offsetof(BlockQ8_K, qs)]), -127);
}

// Every K panel kernel (AVX2, AVX-512; AMX is held to AVX-512 below) gives each output exactly
// k_panel_dot's float steps on the stored row: decode and prefill tiles, a partial last panel
// and half-panel, leftover rows, codes and scales at their extremes, both layouts.
TEST(KernelPanel, KQuantEqualsScalarPanelStepsBitwise) {
  IsaGuard guard;
  std::mt19937 rng(17);
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (isa > best_isa()) continue;
    set_isa(isa);
    for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                       GgmlType::Q6_K, GgmlType::IQ4_XS}) {
      ASSERT_TRUE(panel_supported(t)) << isa_name(isa);
      for (size_t n_in : {256u, 1280u}) {
        for (size_t n_out : {7u, 16u, 29u, 48u}) {
          PanelProblem prob(t, n_in, n_out, 11, rng);
          if (n_out == 48) saturate(prob);
          for (const bool stream : {false, true}) {
            prob.pm = pack_panels(t, prob.w.data(), prob.w_row_bytes, n_in, n_out,
                                  stream ? PanelLayout::stream : PanelLayout::split);
            ASSERT_EQ(prob.pm.streamed, stream);
            for (size_t nr : {1u, 2u, 3u, 4u, 11u}) {
              const auto got = prob.run(0, nr, 0, n_out);
              for (size_t r = 0; r < nr; ++r) {
                for (size_t o = 0; o < n_out; ++o) {
                  const float want =
                      k_panel_dot(t, prob.w.data() + o * prob.w_row_bytes, prob.row(r), n_in);
                  ASSERT_TRUE(testing::same_bits(&got[r * n_out + o], &want, 1))
                      << isa_name(isa) << " " << prob.label() << (stream ? " streamed" : "")
                      << " rows " << nr << " row " << r << " output " << o << ": "
                      << got[r * n_out + o] << " vs " << want;
                }
              }
            }
          }
        }
      }
    }
  }
}

// K-quant prompt rows on AMX tiles (whole tiles of 16; the rest on AVX-512) give the AVX-512
// kernel's bits: several passes of row tiles, a lone last panel, a partial one, leftover rows.
TEST(KernelPanel, KQuantAmxEqualsAvx512Bitwise) {
  IsaGuard guard;
  if (best_isa() != Isa::amx) GTEST_SKIP() << "no AMX on this CPU";
  std::mt19937 rng(11);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    for (size_t n_in : {256u, 1536u}) {
      const size_t n_rows = n_in > 256 ? 37 : 533;
      PanelProblem prob(t, n_in, 37, n_rows, rng);
      for (size_t nr : {size_t{16}, size_t{37}, n_rows}) {
        set_isa(Isa::avx512);
        const auto want = prob.run(0, nr, 0, prob.n_out);
        set_isa(Isa::amx);
        const auto got = prob.run(0, nr, 0, prob.n_out);
        EXPECT_TRUE(testing::same_bits(got.data(), want.data(), want.size()))
            << prob.label() << " rows " << nr;
      }
      // A streamed matrix (packed for AVX-512) runs on AVX-512 under AMX too.
      {
        set_isa(Isa::avx512);
        const auto want = prob.run(0, n_rows, 0, prob.n_out);
        prob.pm =
            pack_panels(t, prob.w.data(), prob.w_row_bytes, n_in, prob.n_out, PanelLayout::stream);
        set_isa(Isa::amx);
        const auto got = prob.run(0, n_rows, 0, prob.n_out);
        EXPECT_TRUE(testing::same_bits(got.data(), want.data(), want.size()))
            << prob.label() << " streamed";
      }
    }
  }
}

// Columns [16, 35) get what the whole product gives them; the others keep their old values.
TEST(KernelPanel, WritesOnlyItsRange) {
  IsaGuard guard;
  if (!have_panels()) GTEST_SKIP() << "no panel kernels on this CPU";
  std::mt19937 rng(3);
  for (GgmlType t : kTypes) {
    if (!have_panels(t)) continue;
    PanelProblem prob(t, is_k_panel(t) ? 256 : 64, 40, 3, rng);
    const auto full = prob.run(0, 3, 0, 40);
    std::vector<float> y(3 * 40, -7.0f);
    y = prob.run(0, 3, 16, 35, std::move(y));
    for (size_t r = 0; r < 3; ++r) {
      for (size_t o = 0; o < 40; ++o) {
        const float v = y[r * 40 + o];
        if (o >= 16 && o < 35) {
          EXPECT_TRUE(testing::same_bits(&v, &full[r * 40 + o], 1))
              << ggml_type_name(t) << " row " << r << " output " << o;
        } else {
          EXPECT_EQ(v, -7.0f) << ggml_type_name(t) << " wrote outside its range at " << o;
        }
      }
    }
    EXPECT_THROW(prob.run(0, 3, 5, 20), std::invalid_argument);  // not a panel boundary
  }
}

}  // namespace
}  // namespace lift::kernels
