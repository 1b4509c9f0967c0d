// Tensor parallelism as a backend: every rank runs the same forward pass on the same batch,
// and each matrix product is split by output rows (whole 16-row panels) over the ranks; each
// rank computes its rows with the backend it wraps and an all-gather gives every rank the whole
// result. Attention is split the same way by K/V heads (each rank attends with its heads over
// its heads' K/V) and gathered per token. The rest (norms, rotary embedding) runs on every rank
// on the gathered activations. A rank's model holds only its rows' panels and its K/V cache
// only its heads (LlamaModel::load and KvCache with the rank's TpShard).
//
// Why this split: an output is the same dot product, in the same order, whichever rank computes
// it (the kernels' results do not depend on the column range they are given: the thread split
// already relies on that), and a gather only moves floats, so logits are bitwise those of one
// rank. The usual Megatron split (o_proj and ffn_down by input dimension, then an all-reduce)
// sums partial dot products in a rank-count-dependent order and cannot keep that promise.
// Cost: five all-gathers per layer: Q/K/V, attention, its output projection, gate/up, down
// (docs/scaling.md).
#pragma once

#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "kernels/panel.h"
#include "parallel/comm.h"
#include "parallel/tp_split.h"

namespace lift {

class TpBackend final : public Backend {
 public:
  TpBackend(std::unique_ptr<Backend> inner, Comm& comm);

  void matmul(const Matrix& w, const float* x, Rows rows, float* y) override;
  void matmul_many(const Matrix* const* ws, float* const* ys, size_t n, const float* x,
                   Rows rows) override;

  void get_rows(const Matrix& table, const int32_t* ids, size_t n, float* out) override {
    inner_->get_rows(table, ids, n, out);
  }
  void rmsnorm(const float* x, const float* weight, size_t n_rows, size_t dim, float eps,
               float* y) override {
    inner_->rmsnorm(x, weight, n_rows, dim, eps, y);
  }
  void rope(float* x, size_t n_rows, size_t n_heads, size_t head_dim, size_t rope_dim,
            const float* cs, RopeStyle style) override {
    inner_->rope(x, n_rows, n_heads, head_dim, rope_dim, cs, style);
  }
  void swiglu(const float* gate, const float* up, size_t n, float* out) override {
    inner_->swiglu(gate, up, n, out);
  }
  void geglu(const float* gate, const float* up, size_t n, float* out) override {
    inner_->geglu(gate, up, n, out);
  }
  void add_bias(float* x, size_t n_rows, size_t dim, const float* bias) override {
    inner_->add_bias(x, n_rows, dim, bias);
  }
  void softcap(float* x, size_t n, float cap) override { inner_->softcap(x, n, cap); }
  // Divided by K/V heads (each with its group of query heads), gathered per token.
  void attention(const AttentionArgs& a) override;
  void prefetch_during_next(std::span<const MemRange> ranges) override {
    inner_->prefetch_during_next(ranges);
  }
  const char* name() const override { return inner_->name(); }
  bool tensor_parallel() const override { return true; }
  Backend& local() override { return *inner_; }

  // Rows [begin, end) of an n_out-row product that `rank` of `size` computes: whole units
  // (16-row panels; K/V heads), as evenly as they go.
  static std::pair<size_t, size_t> share(size_t n_out, int rank, int size,
                                         size_t unit = kernels::kPanelRows) {
    return tp_share(n_out, rank, size, unit);
  }

 private:
  // This rank's rows of w, as a matrix of its own.
  const Matrix& slice(const Matrix& w);
  // One all-gather of several results: part p is [rows][p.n_out] at p.y, rank r computing its
  // columns share(p.n_out, r, size, p.unit); each rank sends (`mine`) its [rows][share] block of
  // every part in turn.
  struct Part {
    size_t n_out, unit;
    float* y;
  };
  void gather(std::span<const Part> parts, size_t n_rows, const float* mine);

  std::unique_ptr<Backend> inner_;
  Comm& comm_;
  std::unordered_map<const void*, Matrix> slices_;  // by the whole matrix's panels or data
  static constexpr size_t kMaxParts = 4;            // products per matmul_many gathered at once
  std::vector<float> mine_, all_;                   // this rank's outputs; every rank's
  std::vector<int> counts_, displs_;
  std::vector<float> q_, o_;  // this rank's heads of the attention's queries and outputs
};

}  // namespace lift
