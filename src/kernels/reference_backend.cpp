// The exactness oracle: plain scalar loops with double accumulation, but the same rounding
// steps as the fast path (weights in their stored type, activations quantized the same way,
// K/V read in the cache's type), so fast vs reference differences are summation noise only.
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/backend.h"
#include "kernels/dequant.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/row_ops_backend.h"

namespace lift {
namespace {

class ReferenceBackend final : public RowOpsBackend {
 public:
  explicit ReferenceBackend(BackendOptions opts) : opts_(opts) {}
  const char* name() const override { return "reference"; }

  void matmul(const Matrix& w, const float* x, Rows rows, float* y) override {
    // Prompt rows, then generated rows, each in the activation format the fast path gives them.
    product(w, x, rows.n_prompt, kernels::RowKind::prompt, y);
    product(w, x + rows.n_prompt * w.n_in, rows.n - rows.n_prompt, kernels::RowKind::generated,
            y + rows.n_prompt * w.n_out);
  }

  void attention(const AttentionArgs& a) override {
    if (a.k_new != nullptr) {
      const size_t d = a.kv.kv_dim;
      for (size_t t = 0; t < a.n_tokens; ++t) {
        kernels::kv_store(a.kv, a.slots[t], 0, d, a.k_new + t * d, a.v_new + t * d);
      }
    }
    const size_t group = a.n_heads / a.n_kv_heads;
    const size_t q_stride = a.n_heads * a.head_dim;
    for (size_t t = 0; t < a.n_tokens; ++t) {
      for (size_t h = 0; h < a.n_heads; ++h) {
        kernels::attend_head_reference(a.q + t * q_stride + h * a.head_dim, a.kv,
                                       (h / group) * a.head_dim, a.head_dim, a.block_tables[t],
                                       a.n_ctx[t], a.scale, a.out + t * q_stride + h * a.head_dim,
                                       kernels::AttendMods{a.softcap, a.window});
      }
    }
  }

 private:
  void product(const Matrix& w, const float* x, size_t n_rows, kernels::RowKind kind, float* y) {
    if (n_rows == 0) return;
    const kernels::ActFormat af = kernels::act_format(w.type, opts_.quantize_activations, kind);
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

  BackendOptions opts_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend(BackendOptions opts) {
  return std::make_unique<ReferenceBackend>(opts);
}

}  // namespace lift
