// Helpers shared by the kernel tests: Isa enumeration and random weight/activation data.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "test_compare.h"

namespace lift::kernels::testing {

// The shared comparisons (tests/test_compare.h): each fails on NaN, on the unwritten sentinel
// and on empty or mismatched sizes.
using test::is_unwritten;
using test::same_bits;
using test::unwritten;
using test::unwritten_floats;
using test::within_tolerance;
using test::written_bytes;

// Every Isa this CPU can run, scalar first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx}) {
    if (i <= best_isa()) out.push_back(i);
  }
  return out;
}

// Restores the active Isa when a test that switches it ends.
class IsaGuard {
 public:
  IsaGuard() : saved_(active_isa()) {}
  ~IsaGuard() { set_isa(saved_); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  Isa saved_;
};

// n_out rows of n_in elements of type t with row stride ggml_row_bytes + pad. Codes are uniform
// random bytes; scales are moderate positive (d) or signed (m) values, so every code and every
// 5th bit occurs and no scale is inf/nan. The pad bytes between rows are random too (a kernel
// that reads them gets garbage), and the buffer ends with the last row's last element: the
// stride is the caller's to honour, but nothing past the last row is part of the matrix, so
// AddressSanitizer sees a read beyond it.
inline std::vector<uint8_t> random_weights(GgmlType t, size_t n_out, size_t n_in, size_t pad,
                                           std::mt19937& rng) {
  const size_t row_bytes = ggml_row_bytes(t, n_in) + pad;
  std::vector<uint8_t> w(n_out == 0 ? 0 : row_bytes * (n_out - 1) + ggml_row_bytes(t, n_in));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.002f, 0.03f);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  const auto& info = ggml_type_info(t);
  for (size_t o = 0; o < n_out; ++o) {
    uint8_t* row = w.data() + o * row_bytes;
    for (size_t i = 0; i < n_in / info.block_elems; ++i) {
      uint8_t* blk = row + i * info.block_bytes;
      auto put16 = [&](size_t off, uint16_t v) { std::memcpy(blk + off, &v, 2); };
      switch (t) {
        case GgmlType::F32: {
          const float v = val(rng);
          std::memcpy(blk, &v, 4);
          break;
        }
        case GgmlType::F16:
          put16(0, f32_to_f16(val(rng)));
          break;
        case GgmlType::BF16:
          put16(0, f32_to_bf16(val(rng)));
          break;
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
          put16(0, f32_to_f16(scale(rng)));
          put16(2, f32_to_f16(val(rng) * 0.2f));
          break;
        // K-quants: small super-block scales (sub-block scales multiply them by up to 127).
        case GgmlType::Q2_K:
          put16(80, f32_to_f16(scale(rng) / 8));
          put16(82, f32_to_f16(scale(rng) / 8));
          break;
        case GgmlType::Q3_K:
          put16(108, f32_to_f16(scale(rng) / 16));
          break;
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
          put16(0, f32_to_f16(scale(rng) / 32));
          put16(2, f32_to_f16(scale(rng) / 32));
          break;
        case GgmlType::Q6_K:
          put16(208, f32_to_f16(scale(rng) / 64));
          break;
        default:
          put16(0, f32_to_f16(scale(rng)));
          break;
      }
    }
  }
  return w;
}

// n floats with a spread of magnitudes per block so that amax, ties and small blocks all occur.
inline std::vector<float> random_activations(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> mag(-6, 3);
  std::vector<float> x(n);
  float block_scale = 1.0f;
  for (size_t i = 0; i < n; ++i) {
    if (i % 32 == 0) block_scale = std::ldexp(1.0f, mag(rng));
    x[i] = nd(rng) * block_scale;
  }
  return x;
}

// The exactness contract's tolerance, row by row (test::within_tolerance): got holds exactly
// n_rows x n_out values, ref at least that many; NaN, inf or an unwritten element fails.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& ref,
                         size_t n_rows, size_t n_out, const std::string& what) {
  EXPECT_TRUE(within_tolerance(got, ref, n_rows, n_out)) << what;
}

// Bytes of n_rows activation rows of row_bytes each, row_stride apart: the last row ends the
// buffer, so a kernel reading past it is caught by AddressSanitizer (the gap between rows is
// what the stride argument is tested with).
inline size_t strided_rows_bytes(size_t n_rows, size_t row_stride, size_t row_bytes) {
  return n_rows == 0 ? 0 : row_stride * (n_rows - 1) + row_bytes;
}

// A product's rows do not depend on their companions, their place in the call or the column
// split, bitwise. prob.run(r0, nr, o_begin, o_end, y) computes rows [r0, r0 + nr), outputs
// [o_begin, o_end) into y (exactly nr x prob.n_out, filled with the unwritten sentinel when
// empty); each cut list splits [0, prob.n_out) at panel boundaries. Every comparison is
// same_bits, so an output no run wrote fails (it would otherwise match itself).
template <class Problem>
void expect_row_and_split_invariance(const Problem& prob, std::initializer_list<size_t> groups,
                                     std::initializer_list<std::vector<size_t>> cut_lists) {
  const size_t n_rows = prob.n_rows, n_out = prob.n_out;
  const auto full = prob.run(0, n_rows, 0, n_out);
  ASSERT_EQ(full.size(), n_rows * n_out) << prob.label();
  for (size_t g : groups) {
    for (size_t r0 = 0; r0 < n_rows; r0 += g) {
      const size_t nr = std::min(g, n_rows - r0);
      const auto part = prob.run(r0, nr, 0, n_out);
      ASSERT_EQ(part.size(), nr * n_out) << prob.label();
      ASSERT_TRUE(same_bits(part.data(), &full[r0 * n_out], nr * n_out))
          << prob.label() << " group " << g << " at " << r0;
    }
  }
  for (const std::vector<size_t>& cuts : cut_lists) {
    std::vector<float> y = unwritten_floats(n_rows * n_out);
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      y = prob.run(0, n_rows, cuts[c], cuts[c + 1], std::move(y));
    }
    ASSERT_TRUE(same_bits(y, full)) << prob.label() << " split";
  }
}

}  // namespace lift::kernels::testing
