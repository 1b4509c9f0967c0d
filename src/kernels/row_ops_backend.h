// The row-wise operations the CPU and reference backends share: embedding lookup, RMSNorm,
// rotary embedding, SwiGLU. They are cheap next to matmul and attention, reduce each row in
// one fixed order, and so need no separate fast and reference versions.
#pragma once

#include "kernels/backend.h"
#include "kernels/dequant.h"
#include "kernels/ops.h"

namespace lift {

class RowOpsBackend : public Backend {
 public:
  void get_rows(const Matrix& table, const int32_t* ids, size_t n, float* out) override {
    for (size_t r = 0; r < n; ++r) {
      kernels::dequantize_row(table.type,
                              table.data + static_cast<size_t>(ids[r]) * table.row_bytes,
                              out + r * table.n_in, table.n_in);
    }
  }
  void rmsnorm(const float* x, const float* weight, size_t n_rows, size_t dim, float eps,
               float* y) override {
    for (size_t r = 0; r < n_rows; ++r) {
      kernels::rmsnorm_row(x + r * dim, weight, dim, eps, y + r * dim);
    }
  }
  void rope(float* x, size_t n_rows, size_t n_heads, size_t head_dim, size_t rope_dim,
            const float* cs) override {
    for (size_t r = 0; r < n_rows; ++r) {
      kernels::rope_row(x + r * n_heads * head_dim, n_heads, head_dim, rope_dim, cs + r * rope_dim);
    }
  }
  void swiglu(const float* gate, const float* up, size_t n, float* out) override {
    kernels::swiglu(gate, up, n, out);
  }
};

}  // namespace lift
