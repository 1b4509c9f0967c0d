// The CPU backend's grouped products (mixtures of experts) give each product exactly what
// matmul() gives it alone, whether they run as one job (panels of one activation format) or
// fall back product by product (mixed formats, stored rows).
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/panel.h"
#include "kernels/quantize.h"
#include "util/thread_pool.h"

namespace lift::kernels::testing {
namespace {

struct Weights {
  std::vector<uint8_t> bytes;
  PanelMatrix panel;
  Matrix m;
};

// A random n_out x n_in matrix of type t, with its panels when the type has them.
void make(Weights& w, GgmlType t, size_t n_in, size_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t row_bytes = ggml_row_bytes(t, n_in);
  w.bytes.resize(row_bytes * n_out);
  std::vector<float> row(n_in);
  for (size_t r = 0; r < n_out; ++r) {
    for (float& x : row) x = nd(rng);
    quantize_row(t, row.data(), w.bytes.data() + r * row_bytes, n_in);
  }
  w.m = Matrix{t, w.bytes.data(), n_in, n_out, row_bytes};
  if (panel_supported(t)) {
    w.panel = pack_panels(t, w.bytes.data(), row_bytes, n_in, n_out);
    w.m.panel = &w.panel;
  }
}

std::vector<float> random_rows(size_t n, size_t n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n * n_in);
  for (float& v : x) v = nd(rng);
  return x;
}

void expect_grouped_equals_each(const std::vector<GgmlType>& types, bool quantize) {
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool, BackendOptions{.quantize_activations = quantize});
  constexpr size_t kIn = 256;
  const size_t outs[] = {48, 80, 16, 64}, rows[] = {3, 1, 5, 2}, prompt[] = {2, 0, 5, 0};
  std::deque<Weights> ws;
  std::vector<std::vector<float>> xs, want, got;
  std::vector<Product> ps;
  for (size_t i = 0; i < types.size(); ++i) {
    make(ws.emplace_back(), types[i], kIn, outs[i % 4], static_cast<uint32_t>(i + 1));
    xs.push_back(random_rows(rows[i % 4], kIn, static_cast<uint32_t>(100 + i)));
  }
  for (size_t i = 0; i < types.size(); ++i) {
    const Rows r{rows[i % 4], prompt[i % 4]};
    want.push_back(unwritten_floats(r.n * outs[i % 4]));
    got.push_back(unwritten_floats(r.n * outs[i % 4]));
    be->matmul(ws[i].m, xs[i].data(), r, want.back().data());
  }
  for (size_t i = 0; i < types.size(); ++i) {
    ps.push_back({&ws[i].m, xs[i].data(), Rows{rows[i % 4], prompt[i % 4]}, got[i].data()});
  }
  be->matmul_grouped(ps);
  for (size_t i = 0; i < types.size(); ++i) {
    EXPECT_TRUE(same_bits(got[i], want[i]))
        << "product " << i << " (" << ggml_type_name(types[i]) << ")";
  }
}

TEST(CpuBackend, GroupedProductsEqualEachAlone) {
  using T = GgmlType;
  // One job: panels of one activation format (8-bit: Q8_K for K-quants, Q8_0 for Q8_0/Q4_0).
  expect_grouped_equals_each({T::Q4_K, T::Q4_K, T::Q6_K, T::Q4_K}, true);
  expect_grouped_equals_each({T::Q8_0, T::Q4_0, T::Q8_0}, true);
  // f32 activations (--exact-activations) on the same panels.
  expect_grouped_equals_each({T::Q4_K, T::Q8_0}, false);
  // Mixed formats and stored rows: product by product.
  expect_grouped_equals_each({T::Q4_K, T::Q8_0, T::F32, T::Q4_1}, true);
}

}  // namespace
}  // namespace lift::kernels::testing
