#include "parallel/tp_backend.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace lift {

TpBackend::TpBackend(std::unique_ptr<Backend> inner, Comm& comm)
    : inner_(std::move(inner)), comm_(comm) {
  counts_.resize(static_cast<size_t>(comm.size()));
  displs_.resize(static_cast<size_t>(comm.size()));
}

const Matrix& TpBackend::slice(const Matrix& w) {
  const void* key = w.panel != nullptr ? static_cast<const void*>(w.panel) : w.data;
  auto it = slices_.find(key);
  if (it != slices_.end()) return it->second;
  const auto [b, e] = share(w.n_out, comm_.rank(), comm_.size());
  // Panels were packed for this rank's rows only (LlamaModel::load with its TpShard); stored
  // rows are read in place from the whole tensor.
  if (w.panel != nullptr && (w.panel->row0 != b || w.panel->n_out != e - b)) {
    throw Error(
        "tensor parallelism: a matrix not loaded for this rank's rows (LlamaModel::load "
        "with the group's TpShard)");
  }
  Matrix s = w;
  s.n_out = e - b;
  if (w.data != nullptr) s.data = w.data + b * w.row_bytes;
  return slices_.emplace(key, s).first->second;
}

void TpBackend::gather(std::span<const Part> parts, size_t n_rows, const float* mine) {
  const auto size = static_cast<size_t>(comm_.size());
  size_t total = 0;
  for (size_t r = 0; r < size; ++r) {
    size_t count = 0;
    for (const Part& p : parts) {
      const auto [b, e] = share(p.n_out, static_cast<int>(r), comm_.size(), p.unit);
      count += (e - b) * n_rows;
    }
    counts_[r] = static_cast<int>(count);
    displs_[r] = static_cast<int>(total);
    total += count;
  }
  if (all_.size() < total) all_.resize(total);
  comm_.all_gather(mine, counts_, displs_, all_.data());
  for (size_t r = 0; r < size; ++r) {
    const float* src = all_.data() + displs_[r];
    for (const Part& p : parts) {
      const auto [b, e] = share(p.n_out, static_cast<int>(r), comm_.size(), p.unit);
      const size_t w = e - b;
      for (size_t t = 0; t < n_rows && w > 0; ++t)
        std::memcpy(p.y + t * p.n_out + b, src + t * w, 4 * w);
      src += w * n_rows;
    }
  }
}

void TpBackend::attention(const AttentionArgs& a) {
  // A rank's cache holds its share of the K/V heads; the forward pass stores them itself.
  if (a.k_new != nullptr) throw Error("tensor-parallel attention takes the batch's K/V stored");
  const size_t group = a.n_heads / a.n_kv_heads, hd = a.head_dim;
  const auto [g0, g1] = share(a.n_kv_heads, comm_.rank(), comm_.size(), 1);
  const size_t full = a.n_heads * hd, h0 = g0 * group, width = (g1 - g0) * group * hd;
  if (q_.size() < std::max<size_t>(1, a.n_tokens * width)) {
    q_.resize(a.n_tokens * width + 1);
    o_.resize(a.n_tokens * width + 1);
  }
  if (width > 0) {
    for (size_t t = 0; t < a.n_tokens; ++t) {
      std::memcpy(q_.data() + t * width, a.q + t * full + h0 * hd, 4 * width);
    }
    AttentionArgs s = a;
    s.q = q_.data();
    s.out = o_.data();
    s.n_heads = (g1 - g0) * group;
    s.n_kv_heads = g1 - g0;
    // A cache of this rank's heads (tp_follow's, and the leader's under TP) is read as it is;
    // a whole one through a view that keeps its strides and starts where this rank's first
    // head does, slot 0 (whatever the layout: a region per head, or one with heads side by
    // side; KvLayerView).
    if (a.kv.kv_dim == a.n_kv_heads * hd) {
      const size_t elem = a.kv.type == GgmlType::F32 ? 4 : 2;
      s.kv.k = static_cast<const uint8_t*>(a.kv.k) + a.kv.k_index(0, g0 * hd) * elem;
      s.kv.v = static_cast<const uint8_t*>(a.kv.v) + a.kv.v_index(0, g0 * hd) * elem;
    } else if (a.kv.kv_dim != (g1 - g0) * hd) {
      throw Error("tensor parallelism: the K/V cache holds neither all heads nor this rank's");
    }
    inner_->attention(s);
  }
  // Rank r's columns: its heads', share(n_kv_heads, r, size, 1) K/V heads of group * hd each.
  const Part out{full, group * hd, a.out};
  gather({&out, 1}, a.n_tokens, o_.data());
}

void TpBackend::matmul(const Matrix& w, const float* x, Rows rows, float* y) {
  const Matrix* ws[] = {&w};
  float* ys[] = {y};
  matmul_many(ws, ys, 1, x, rows);
}

void TpBackend::matmul_many(const Matrix* const* ws, float* const* ys, size_t n, const float* x,
                            Rows rows) {
  if (n > kMaxParts) {
    for (size_t i = 0; i < n; ++i) matmul(*ws[i], x, rows, ys[i]);
    return;
  }
  // This rank's rows of every product, one after the other in one buffer, so that one
  // all-gather serves them all (Q/K/V, gate/up: three and two exchanges fewer per layer).
  const Matrix* parts[kMaxParts];
  size_t at[kMaxParts];
  Part gathered[kMaxParts];
  size_t m = 0, mine = 0;
  for (size_t i = 0; i < n; ++i) {
    const Matrix& s = slice(*ws[i]);
    if (s.n_out > 0) {
      parts[m] = &s;
      at[m++] = mine;
    }
    mine += s.n_out * rows.n;
    gathered[i] = {ws[i]->n_out, kernels::kPanelRows, ys[i]};
  }
  if (mine_.size() < std::max<size_t>(1, mine)) mine_.resize(mine + 1);
  float* outs[kMaxParts];
  for (size_t i = 0; i < m; ++i) outs[i] = mine_.data() + at[i];
  if (m > 0) inner_->matmul_many(parts, outs, m, x, rows);
  gather({gathered, n}, rows.n, mine_.data());
}

}  // namespace lift
