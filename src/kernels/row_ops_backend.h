// The row-wise operations the CPU and reference backends share: embedding lookup, RMSNorm,
// rotary embedding, SwiGLU. They are cheap next to matmul and attention, reduce each row in
// one fixed order, and so need no separate fast and reference versions.
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
            const float* cs) override {
    for_rows(n_rows, [&](size_t r) {
      kernels::rope_row(x + r * n_heads * head_dim, n_heads, head_dim, rope_dim, cs + r * rope_dim);
    });
  }
  // Elementwise, so any split gives the same values; chunks of kSwigluChunk.
  void swiglu(const float* gate, const float* up, size_t n, float* out) override {
    constexpr size_t kSwigluChunk = 1024;
    for_rows((n + kSwigluChunk - 1) / kSwigluChunk, [&](size_t c) {
      const size_t i = c * kSwigluChunk;
      kernels::swiglu(gate + i, up + i, std::min(kSwigluChunk, n - i), out + i);
    });
  }

 protected:
  // Calls fn(ctx, i) once for every i < n, in any order and on any thread: the rows are
  // independent. One by one here; the CPU backend spreads them over its pool.
  using RowFn = void (*)(const void* ctx, size_t i);
  virtual void run_rows(size_t n, RowFn fn, const void* ctx) {
    for (size_t i = 0; i < n; ++i) fn(ctx, i);
  }

 private:
  template <class F>
  void for_rows(size_t n, const F& f) {
    run_rows(
        n, [](const void* ctx, size_t i) { (*static_cast<const F*>(ctx))(i); }, &f);
  }
};

}  // namespace lift
