#include "parallel/tp_backend.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace lift {

namespace {
void no_free(void*) {}
}  // namespace

TpBackend::TpBackend(std::unique_ptr<Backend> inner, Comm& comm)
    : inner_(std::move(inner)), comm_(comm) {
  counts_.resize(static_cast<size_t>(comm.size()));
  displs_.resize(static_cast<size_t>(comm.size()));
}

std::pair<size_t, size_t> TpBackend::share(size_t n_out, int rank, int size) {
  const size_t panels = (n_out + kernels::kPanelRows - 1) / kernels::kPanelRows;
  const auto r = static_cast<size_t>(rank), s = static_cast<size_t>(size);
  const size_t b = std::min(n_out, panels * r / s * kernels::kPanelRows);
  const size_t e = std::min(n_out, panels * (r + 1) / s * kernels::kPanelRows);
  return {b, e};
}

const Matrix& TpBackend::slice(const Matrix& w) {
  const void* key = w.panel != nullptr ? static_cast<const void*>(w.panel) : w.data;
  auto it = slices_.find(key);
  if (it != slices_.end()) return it->second.m;
  const auto [b, e] = share(w.n_out, comm_.rank(), comm_.size());
  Slice s;
  s.m = w;
  s.m.n_out = e - b;
  if (w.data != nullptr) s.m.data = w.data + b * w.row_bytes;
  if (w.panel != nullptr) {
    s.panel = std::make_unique<kernels::PanelMatrix>();
    s.panel->type = w.panel->type;
    s.panel->n_in = w.panel->n_in;
    s.panel->n_out = e - b;
    s.panel->panel_bytes = w.panel->panel_bytes;
    // A view: the whole matrix's panels from this rank's first one on (b is a panel start).
    s.panel->data = std::unique_ptr<uint8_t[], void (*)(void*)>(
        const_cast<uint8_t*>(w.panel->panel(b / kernels::kPanelRows)), no_free);
    s.m.panel = s.panel.get();
  }
  return slices_.emplace(key, std::move(s)).first->second.m;
}

void TpBackend::gather(size_t n_out, size_t n_rows, const float* mine, float* y) {
  const auto size = static_cast<size_t>(comm_.size());
  size_t total = 0;
  for (size_t r = 0; r < size; ++r) {
    const auto [b, e] = share(n_out, static_cast<int>(r), comm_.size());
    counts_[r] = static_cast<int>((e - b) * n_rows);
    displs_[r] = static_cast<int>(total);
    total += (e - b) * n_rows;
  }
  if (all_.size() < total) all_.resize(total);
  comm_.all_gather(mine, counts_, displs_, all_.data());
  for (size_t r = 0; r < size; ++r) {
    const auto [b, e] = share(n_out, static_cast<int>(r), comm_.size());
    const size_t w = e - b;
    if (w == 0) continue;
    const float* src = all_.data() + displs_[r];
    for (size_t i = 0; i < n_rows; ++i) std::memcpy(y + i * n_out + b, src + i * w, 4 * w);
  }
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
  const Matrix* parts[kMaxParts];
  float* outs[kMaxParts];
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const Matrix& s = slice(*ws[i]);
    const size_t need = std::max<size_t>(1, s.n_out * rows.n);
    if (mine_[i].size() < need) mine_[i].resize(need);
    if (s.n_out > 0) {
      parts[m] = &s;
      outs[m++] = mine_[i].data();
    }
  }
  if (m > 0) inner_->matmul_many(parts, outs, m, x, rows);
  for (size_t i = 0; i < n; ++i) gather(ws[i]->n_out, rows.n, mine_[i].data(), ys[i]);
}

}  // namespace lift
