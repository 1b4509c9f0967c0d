// The exactness oracle: plain scalar loops with double accumulation, but the same rounding
// steps as the fast path (weights in their stored type, activations quantized the same way,
// K/V read in the cache's type), so fast vs reference differences are summation noise only.
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/backend.h"
#include "kernels/dequant.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace lift {
namespace {

class ReferenceBackend final : public Backend {
 public:
  explicit ReferenceBackend(BackendOptions opts) : opts_(opts) {}
  const char* name() const override { return "reference"; }

  void matmul(const Matrix& w, const float* x, size_t n_rows, float* y) override {
    const kernels::ActFormat af = kernels::act_format(w.type, opts_.quantize_activations);
    const void* act = x;
    size_t act_stride = w.n_in * sizeof(float);
    std::vector<uint8_t> buf;
    if (af != kernels::ActFormat::f32) {
      act_stride = kernels::act_row_bytes(af, w.n_in);
      buf.resize(act_stride * n_rows);
      for (size_t r = 0; r < n_rows; ++r) {
        kernels::quantize_activation_row(af, x + r * w.n_in, w.n_in, buf.data() + r * act_stride);
      }
      act = buf.data();
    }
    kernels::matmul_reference(w.type, w.data, w.row_bytes, w.n_in, af, act, act_stride, n_rows, y,
                              w.n_out, 0, w.n_out);
  }

  void get_rows(const Matrix& table, const int32_t* ids, size_t n, float* out) override {
    for (size_t r = 0; r < n; ++r) {
      kernels::dequantize_row(table.type,
                              table.data + static_cast<size_t>(ids[r]) * table.row_bytes,
                              out + r * table.n_in, table.n_in);
    }
  }

  void rmsnorm(const float* x, const float* weight, size_t n_rows, size_t dim, float eps,
               float* y) override {
    for (size_t r = 0; r < n_rows; ++r)
      kernels::rmsnorm_row(x + r * dim, weight, dim, eps, y + r * dim);
  }

  void rope(float* x, size_t n_rows, size_t n_heads, size_t head_dim, size_t rope_dim,
            const int32_t* pos, const float* inv_freq) override {
    for (size_t r = 0; r < n_rows; ++r) {
      kernels::rope_row(x + r * n_heads * head_dim, n_heads, head_dim, rope_dim, pos[r], inv_freq);
    }
  }

  void swiglu(const float* gate, const float* up, size_t n, float* out) override {
    kernels::swiglu(gate, up, n, out);
  }

  void attention(const AttentionArgs& a) override {
    const size_t group = a.n_heads / a.n_kv_heads;
    const size_t q_stride = a.n_heads * a.head_dim;
    for (size_t t = 0; t < a.n_tokens; ++t) {
      for (size_t h = 0; h < a.n_heads; ++h) {
        kernels::attend_head_reference(a.q + t * q_stride + h * a.head_dim, a.kv,
                                       (h / group) * a.head_dim, a.head_dim, a.block_tables[t],
                                       a.n_ctx[t], a.scale, a.out + t * q_stride + h * a.head_dim);
      }
    }
  }

 private:
  BackendOptions opts_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend(BackendOptions opts) {
  return std::make_unique<ReferenceBackend>(opts);
}

}  // namespace lift
