// The row-wise operations the CPU and reference backends share: embedding lookup, RMSNorm,
// rotary embedding, SwiGLU/GeGLU, biases, soft-capping. They are cheap next to matmul and
// attention, reduce each row in one fixed order, and so need no separate fast and reference
// versions.
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/backend.h"
#include "kernels/dequant.h"
#include "kernels/ops.h"

namespace lift {

class RowOpsBackend : public Backend {
 public:
  void get_rows(const Matrix& table, const int32_t* ids, size_t n, float* out) override {
    for_rows(n, [&](size_t r) {
      kernels::dequantize_row(table.type,
                              table.data + static_cast<size_t>(ids[r]) * table.row_bytes,
                              out + r * table.n_in, table.n_in);
    });
  }
  void rmsnorm(const float* x, const float* weight, size_t n_rows, size_t dim, float eps,
               float* y) override {
    for_rows(n_rows,
             [&](size_t r) { kernels::rmsnorm_row(x + r * dim, weight, dim, eps, y + r * dim); });
  }
  void rope(float* x, size_t n_rows, size_t n_heads, size_t head_dim, size_t rope_dim,
            const float* cs, RopeStyle style) override {
    for_rows(n_rows, [&](size_t r) {
      kernels::rope_row(x + r * n_heads * head_dim, n_heads, head_dim, rope_dim, cs + r * rope_dim,
                        style);
    });
  }
  // Elementwise, so any split gives the same values; chunks of kChunk.
  void swiglu(const float* gate, const float* up, size_t n, float* out) override {
    for_chunks(n, [&](size_t i, size_t len) { kernels::swiglu(gate + i, up + i, len, out + i); });
  }
  void geglu(const float* gate, const float* up, size_t n, float* out) override {
    for_chunks(n, [&](size_t i, size_t len) { kernels::geglu(gate + i, up + i, len, out + i); });
  }
  void add_bias(float* x, size_t n_rows, size_t dim, const float* bias) override {
    for (size_t r = 0; r < n_rows; ++r) {
      for (size_t i = 0; i < dim; ++i) x[r * dim + i] += bias[i];
    }
  }
  void softcap(float* x, size_t n, float cap) override {
    for_chunks(n, [&](size_t i, size_t len) { kernels::softcap_scores(x + i, len, cap); });
  }

 protected:
  // Calls fn(ctx, i) once for every i < n, in any order and on any thread: the rows are
  // independent. One by one here; the CPU backend spreads them over its pool.
  using RowFn = void (*)(const void* ctx, size_t i);
  virtual void run_rows(size_t n, RowFn fn, const void* ctx) {
    for (size_t i = 0; i < n; ++i) fn(ctx, i);
  }

 private:
  // f(begin, length) over [0, n) in chunks.
  template <class F>
  void for_chunks(size_t n, const F& f) {
    constexpr size_t kChunk = 1024;
    for_rows((n + kChunk - 1) / kChunk,
             [&](size_t c) { f(c * kChunk, std::min(kChunk, n - c * kChunk)); });
  }
  template <class F>
  void for_rows(size_t n, const F& f) {
    run_rows(
        n, [](const void* ctx, size_t i) { (*static_cast<const F*>(ctx))(i); }, &f);
  }
};

}  // namespace lift
