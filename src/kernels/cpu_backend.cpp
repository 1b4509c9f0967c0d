// The optimized CPU backend: SIMD kernels (picked at run time), split over the thread pool by
// output columns or by (token, head), never over an inner dimension.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/backend.h"
#include "kernels/dequant.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/panel.h"
#include "kernels/panel_amx.h"
#include "kernels/quant_blocks.h"
#include "kernels/row_ops_backend.h"
#include "util/large_alloc.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

// Into L2 (and so L3): the lines are read a few microseconds later, maybe by the other core.
void prefetch_l2(std::span<const MemRange> ranges) {
  for (const MemRange& r : ranges) {
    const char* p = static_cast<const char*>(r.p);
    for (size_t o = 0; o < r.bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
  }
}

class CpuBackend final : public RowOpsBackend {
 public:
  CpuBackend(ThreadPool& pool, BackendOptions opts) : pool_(pool), opts_(opts) {
    scratch_.resize(static_cast<size_t>(pool.size()));
  }

  const char* name() const override { return "cpu"; }

  void matmul(const Matrix& w, const float* x, Rows rows, float* y) override {
    const Matrix* ws[] = {&w};
    float* ys[] = {y};
    matmul_many(ws, ys, 1, x, rows);
  }

  // Kept for the next panel product's job, which issues it as one more task, its last: the
  // first core to run out of columns takes it instead of waiting for the other's last task.
  void prefetch_during_next(std::span<const MemRange> ranges) override {
    if (pool_.size() > 1) prefetch_.assign(ranges.begin(), ranges.end());
  }

  // Prompt rows on AMX tiles where the weights allow (one packing of x for all of ws), then the
  // remaining rows as generated rows.
  // Panel products of the same activation format: every product's rows quantized in one pool
  // pass, then one dispatch over all their output columns. Anything else (stored rows, prompt
  // rows bound for AMX, mixed formats) goes product by product.
  void matmul_grouped(std::span<const Product> ps) override {
    if (ps.empty()) return;
    const kernels::ActFormat af = kernels::act_format(ps[0].w->type, opts_.quantize_activations);
    const size_t n_in = ps[0].w->n_in;
    bool fused = true;
    for (const Product& p : ps) {
      fused = fused && p.w->n_in == n_in && use_panel(*p.w, af) &&
              kernels::act_format(p.w->type, opts_.quantize_activations) == af &&
              !(p.rows.n_prompt > 0 && use_amx(*p.w));
    }
    if (!fused) {
      Backend::matmul_grouped(ps);
      prefetch_.clear();
      return;
    }
    group_ws_.clear();
    group_first_.assign(1, 0);
    for (const Product& p : ps) {
      group_ws_.push_back(p.w);
      group_first_.push_back(group_first_.back() + p.rows.n);
    }
    const size_t total = group_first_.back();
    const bool quantized = af != kernels::ActFormat::f32,
               with_info = af == kernels::ActFormat::q8_0;
    const size_t stride = quantized ? kernels::act_row_bytes(af, n_in) : 0;
    const size_t nb = n_in / kernels::kQBlock;
    if (quantized) {
      if (act_buf_.size() < stride * total) act_buf_.resize(stride * total);
      if (with_info && info_buf_.size() < nb * total) info_buf_.resize(nb * total);
      uint8_t* buf = act_buf_.data();
      kernels::ActBlockInfo* ib = with_info ? info_buf_.data() : nullptr;
      pool_.parallel_for(total, [&](size_t r, int) {
        size_t g = 0;
        while (r >= group_first_[g + 1]) ++g;
        const float* x = ps[g].x + (r - group_first_[g]) * n_in;
        kernels::quantize_activation_row(af, x, n_in, buf + r * stride);
        if (ib != nullptr) kernels::act_block_info(buf + r * stride, n_in, ib + r * nb);
      });
    }
    panel_columns(group_ws_.data(), ps.size(), [&](size_t i, size_t o0, size_t o1) {
      const Product& p = ps[i];
      const size_t first = group_first_[i];
      const void* act = quantized ? static_cast<const void*>(act_buf_.data() + first * stride)
                                  : static_cast<const void*>(p.x);
      const kernels::ActBlockInfo* info = with_info ? info_buf_.data() + first * nb : nullptr;
      kernels::matmul_panels(*p.w->panel, act, quantized ? stride : n_in * sizeof(float), info,
                             p.rows.n, p.y, p.w->n_out, o0, o1);
    });
  }

  void matmul_many(const Matrix* const* ws, float* const* ys, size_t n, const float* x,
                   Rows rows) override {
    size_t done = 0;
    if (rows.n_prompt > 0) {
      size_t amx = 0;
      for (size_t i = 0; i < n; ++i) amx += use_amx(*ws[i]) && ws[i]->n_in == ws[0]->n_in;
      if (amx > 0 && (amx < n || n > kMaxMany)) {
        // Mixed weight types: each product on its own, as matmul() would do it.
        for (size_t i = 0; i < n; ++i) matmul_many(ws + i, ys + i, 1, x, rows);
        return;
      }
      if (amx == n) {
        matmul_amx(ws, ys, n, x, rows.n_prompt);
        done = rows.n_prompt;
      }
    }
    if (done < rows.n) {
      float* rest[kMaxMany];
      float* const* yr = ys;
      if (done > 0) {
        for (size_t i = 0; i < n; ++i) rest[i] = ys[i] + done * ws[i]->n_out;
        yr = rest;
      }
      generated_products(ws, yr, n, x + done * ws[0]->n_in, rows.n - done);
    }
    prefetch_.clear();  // a product that took no panel job leaves the hint unused
  }

 private:
  void generated_products(const Matrix* const* ws, float* const* ys, size_t n, const float* x,
                          size_t n_rows) {
    const kernels::ActFormat af = kernels::act_format(ws[0]->type, opts_.quantize_activations);
    if (n == 1) {
      if (use_panel(*ws[0], af)) return matmul_panels(ws, ys, 1, af, x, n_rows);
      return matmul_rows(*ws[0], af, prepare(af, x, ws[0]->n_in, n_rows, false), n_rows, ys[0]);
    }
    // One activation preparation serves them all when they read the same input the same way;
    // then all on panels (one pool job) or all on stored rows.
    bool same = true, panels = n <= kMaxMany, rows = true;
    for (size_t i = 0; i < n; ++i) {
      same = same && ws[i]->n_in == ws[0]->n_in &&
             kernels::act_format(ws[i]->type, opts_.quantize_activations) == af;
      panels = panels && use_panel(*ws[i], af);
      rows = rows && !use_panel(*ws[i], af);
    }
    if (same && panels) return matmul_panels(ws, ys, n, af, x, n_rows);
    if (same && rows) {
      const Activations a = prepare(af, x, ws[0]->n_in, n_rows, false);
      for (size_t i = 0; i < n; ++i) matmul_rows(*ws[i], af, a, n_rows, ys[i]);
      return;
    }
    for (size_t i = 0; i < n; ++i) generated_products(ws + i, ys + i, 1, x, n_rows);
  }

  // Whether w's prompt rows go to the AMX kernels: an F16/BF16 panel and bf16x2 activations.
  bool use_amx(const Matrix& w) const {
    return w.panel != nullptr &&
           kernels::act_format(w.type, opts_.quantize_activations, kernels::RowKind::prompt) ==
               kernels::ActFormat::bf16x2;
  }

  // Prompt rows of products of the same activations on AMX tiles: x packed once (16-row groups
  // over the pool), then one dispatch over all outputs in whole panels.
  void matmul_amx(const Matrix* const* ws, float* const* ys, size_t n, const float* x,
                  size_t n_rows) {
    const size_t n_in = ws[0]->n_in;
    const size_t bytes = kernels::amx_act_bytes(n_in, n_rows);
    if (amx_capacity_ < bytes) {
      amx_buf_.reset(static_cast<uint8_t*>(alloc_streamed(bytes)));
      amx_capacity_ = bytes;
    }
    uint8_t* buf = amx_buf_.get();
    pool_.parallel_for((n_rows + 15) / 16, [&](size_t g, int) {
      kernels::amx_pack_activations(x, n_in, n_rows, g, buf);
    });
    panel_columns(ws, n, [&](size_t i, size_t o0, size_t o1) {
      kernels::matmul_panels_amx(*ws[i]->panel, buf, n_rows, ys[i], ws[i]->n_out, o0, o1);
    });
  }

  // One pool dispatch over the output columns of ws[0..n), in whole panels: fn(i, o0, o1)
  // computes outputs [o0, o1) of ws[i].
  // Tasks shrink as a matrix's columns run out (guided scheduling): each takes a 1 / threads
  // share of what is left, at least kPanelTile rows. A decode step streams its weights from
  // DRAM, and long runs of panels read faster than the equal tasks of n / (8 x threads) rows this
  // replaced (1.1B Q4_K_M tg64, two threads, against the bandwidth read around each repetition:
  // 57-63% at 52-56 GB/s with those, 61-71% at 48-57 GB/s with these; alike at 32 GB/s), while
  // the last, small tasks still let the cores finish together when one is slowed down (tg32
  // with --contend 1: 25.1-25.4 t/s before, 26.4-27.6 after).
  template <class Fn>
  void panel_columns(const Matrix* const* ws, size_t n, Fn&& fn) {
    const size_t share = static_cast<size_t>(pool_.size());
    first_task_.assign(n + 1, 0);
    std::vector<size_t>& first_task = first_task_;
    task_rows_.clear();
    for (size_t i = 0; i < n; ++i) {
      size_t left = (ws[i]->n_out + kPanelTile - 1) / kPanelTile;  // in units of kPanelTile
      size_t tasks = 0;
      for (size_t o = 0; left > 0; ++tasks) {
        const size_t take = (left + share - 1) / share;
        task_rows_.push_back(o);
        o += take * kPanelTile;
        left -= take;
      }
      first_task[i + 1] = first_task[i] + tasks;
      task_rows_.push_back(ws[i]->n_out);  // the end of the matrix's last task
    }
    const size_t n_tasks = first_task[n];
    pool_.parallel_for(n_tasks + !prefetch_.empty(), [&](size_t t, int) {
      if (t == n_tasks) return prefetch_l2(prefetch_);
      size_t i = 0;
      while (t >= first_task[i + 1]) ++i;
      // Matrix i's tasks start at task_rows_[first_task[i] + i + k]: one end entry per matrix.
      const size_t at = t + i;
      fn(i, task_rows_[at], std::min(ws[i]->n_out, task_rows_[at + 1]));
    });
    prefetch_.clear();
  }

  // Whether w's product runs on its load-time panels: they exist, the active kernels have them
  // (the Isa may have been lowered since loading), and the activation format is theirs.
  static bool use_panel(const Matrix& w, kernels::ActFormat af) {
    return w.panel != nullptr && kernels::panel_supported(w.type) &&
           (af != kernels::ActFormat::f32) == kernels::is_quantized(w.type);
  }

  // The activation rows a product reads: x itself for f32, else quantized into act_buf_ (and,
  // for the panel kernels, each block's info into info_buf_), one pass over the pool.
  struct Activations {
    const void* data;
    size_t stride;
    const kernels::ActBlockInfo* info;
  };
  Activations prepare(kernels::ActFormat af, const float* x, size_t n_in, size_t n_rows,
                      bool with_info) {
    if (af == kernels::ActFormat::f32) return {x, n_in * sizeof(float), nullptr};
    const size_t stride = kernels::act_row_bytes(af, n_in), nb = n_in / kernels::kQBlock;
    if (act_buf_.size() < stride * n_rows) act_buf_.resize(stride * n_rows);
    if (with_info && info_buf_.size() < nb * n_rows) info_buf_.resize(nb * n_rows);
    uint8_t* buf = act_buf_.data();
    kernels::ActBlockInfo* ib = with_info ? info_buf_.data() : nullptr;
    pool_.parallel_for(n_rows, [&](size_t r, int) {
      kernels::quantize_activation_row(af, x + r * n_in, n_in, buf + r * stride);
      if (ib != nullptr) kernels::act_block_info(buf + r * stride, n_in, ib + r * nb);
    });
    return {buf, stride, ib};
  }

  // A product on the stored rows, split over output columns.
  void matmul_rows(const Matrix& w, kernels::ActFormat af, const Activations& a, size_t n_rows,
                   float* y) {
    const size_t tile = column_tile(w.n_out);
    const size_t n_tasks = (w.n_out + tile - 1) / tile;
    pool_.parallel_for(n_tasks, [&](size_t t, int) {
      const size_t o0 = t * tile, o1 = std::min(w.n_out, o0 + tile);
      kernels::matmul(w.type, w.data, w.row_bytes, w.n_in, af, a.data, a.stride, n_rows, y, w.n_out,
                      o0, o1);
    });
  }

  // Panel products of the same activations: quantized once with their block info, then one
  // dispatch over the output columns of all of them, split in whole panels.
  void matmul_panels(const Matrix* const* ws, float* const* ys, size_t n, kernels::ActFormat af,
                     const float* x, size_t n_rows) {
    // Only the q8_0 panels read block info; K panels take the Q8_K rows as they are.
    const Activations a = prepare(af, x, ws[0]->n_in, n_rows, af == kernels::ActFormat::q8_0);
    panel_columns(ws, n, [&](size_t i, size_t o0, size_t o1) {
      kernels::matmul_panels(*ws[i]->panel, a.data, a.stride, a.info, n_rows, ys[i], ws[i]->n_out,
                             o0, o1);
    });
  }

  // Enough column tiles that both cores finish together even if one is slowed down, each a
  // multiple of `unit` rows (the kernels' widest tile, so no task ends in narrow leftovers).
  size_t column_tile(size_t n_out, size_t unit = 16) const {
    const size_t threads = static_cast<size_t>(pool_.size());
    const size_t tile = (n_out + threads * 8 - 1) / (threads * 8);
    return std::max(unit, (tile + unit - 1) / unit * unit);
  }
  static constexpr size_t kPanelTile = 4 * kernels::kPanelRows;

 public:
  void attention(const AttentionArgs& a) override {
    const size_t need = kernels::attention_scratch_floats(a.kv.block_size, a.head_dim);
    for (auto& s : scratch_) {
      if (s.size() < need) s.resize(need);
    }
    // Tiles: runs of consecutive positions of one sequence (a prompt chunk) times query heads
    // of one K/V head (grouped-query attention), so each K/V row read serves up to
    // kAttentionTile queries. A decode token's tile is its heads that share a K/V head: they
    // read the same rows, and together they keep more independent chains in flight than one
    // query alone. A query's result is the same in any tile (attend_tile), so this only moves
    // work.
    tiles_.clear();
    for (size_t t = 0; t < a.n_tokens;) {
      size_t e = t + 1;
      while (e < a.n_tokens && e - t < kernels::kAttentionTile &&
             a.block_tables[e] == a.block_tables[t] && a.n_ctx[e] == a.n_ctx[e - 1] + 1) {
        ++e;
      }
      tiles_.push_back({t, e});
      t = e;
    }
    const size_t group = a.n_heads / a.n_kv_heads;
    const size_t q_stride = a.n_heads * a.head_dim;
    // Query heads per task: the most of a group that fit with the shortest tile's tokens (a
    // prompt chunk's tiles are full already; a decode or verify tile gains).
    size_t shortest = kernels::kAttentionTile;
    for (const auto& [t0, t1] : tiles_) shortest = std::min(shortest, t1 - t0);
    size_t heads = std::max<size_t>(1, std::min(group, kernels::kAttentionTile / shortest));
    while (group % heads != 0) --heads;
    const size_t n_head_tasks = a.n_heads / heads;
    // The batch's own K/V, if the cache does not hold them yet. Where every sequence has one
    // tile and each task one K/V head (a decode step), a task stores its head's share for its
    // tile before reading: no task reads what another stores, and the stores' wait on their
    // cache lines (one per K dimension) overlaps the attention's own and is split over the
    // cores. Otherwise all of them first, token by token over the pool.
    const bool store_in_tasks = a.k_new != nullptr && heads == group && tiles_store_apart(a);
    if (a.k_new != nullptr && !store_in_tasks) {
      const size_t d = a.kv.kv_dim;
      pool_.parallel_for(a.n_tokens, [&](size_t t, int) {
        kernels::kv_store(a.kv, a.slots[t], 0, d, a.k_new + t * d, a.v_new + t * d);
      });
    }
    // Last tiles first: within a prompt chunk they see the most context, and handing out the
    // longest tasks first leaves only short ones to even out the threads at the end.
    pool_.parallel_for(tiles_.size() * n_head_tasks, [&](size_t task, int thread) {
      const auto [t0, t1] = tiles_[tiles_.size() - 1 - task / n_head_tasks];
      const size_t h0 = task % n_head_tasks * heads;
      if (store_in_tasks) {
        const size_t d = a.kv.kv_dim, e0 = h0 / group * a.head_dim;
        for (size_t t = t0; t < t1; ++t) {
          kernels::kv_store(a.kv, a.slots[t], e0, e0 + a.head_dim, a.k_new + t * d,
                            a.v_new + t * d);
        }
      }
      // Tiles longer than the shortest run their heads in several calls.
      const size_t per_call = std::min(heads, kernels::kAttentionTile / (t1 - t0));
      const float* q[kernels::kAttentionTile];
      float* out[kernels::kAttentionTile];
      int32_t n_ctx[kernels::kAttentionTile];
      for (size_t hb = h0; hb < h0 + heads; hb += per_call) {
        const size_t h_end = std::min(hb + per_call, h0 + heads);
        size_t k = 0;
        for (size_t h = hb; h < h_end; ++h) {
          for (size_t t = t0; t < t1; ++t, ++k) {
            q[k] = a.q + t * q_stride + h * a.head_dim;
            out[k] = a.out + t * q_stride + h * a.head_dim;
            n_ctx[k] = a.n_ctx[t];
          }
        }
        kernels::attend_tile(q, k, a.kv, (hb / group) * a.head_dim, a.head_dim, a.block_tables[t0],
                             n_ctx, a.scale, scratch_[static_cast<size_t>(thread)].data(), out,
                             kernels::AttendMods{a.softcap, a.window});
      }
    });
  }

 private:
  // Whether no tile reads a cache block that another tile stores into (checked pairwise, for up
  // to kMaxStoreTiles tiles). A block being stored into belongs to one sequence (copy-on-write),
  // so another tile can read it only at the same place in its own block table: there that table
  // then holds the same block (the same sequence, or a copy of its table).
  bool tiles_store_apart(const AttentionArgs& a) const {
    constexpr size_t kMaxStoreTiles = 16;
    if (tiles_.size() > kMaxStoreTiles) return false;
    const size_t bs = a.kv.block_size;
    for (size_t i = 0; i < tiles_.size(); ++i) {
      const auto [i0, i1] = tiles_[i];
      // The tile's positions are consecutive: its first and last lie in every block it stores to.
      for (const int32_t n : {a.n_ctx[i0], a.n_ctx[i1 - 1]}) {
        const size_t b = static_cast<size_t>(n - 1) / bs;
        const int32_t block = a.block_tables[i0][b];
        for (size_t j = 0; j < tiles_.size(); ++j) {
          const auto [j0, j1] = tiles_[j];
          if (j != i && b * bs < static_cast<size_t>(a.n_ctx[j1 - 1]) &&
              a.block_tables[j0][b] == block) {
            return false;
          }
        }
      }
    }
    return true;
  }

 protected:
  // Row ops (embedding lookup, RMSNorm, RoPE, SwiGLU chunks) over the pool.
  void run_rows(size_t n, RowFn fn, const void* ctx) override {
    pool_.parallel_for(n, [&](size_t i, int) { fn(ctx, i); });
  }

 private:
  ThreadPool& pool_;
  BackendOptions opts_;
  static constexpr size_t kMaxMany = 4;
  std::vector<size_t> task_rows_;   // panel_columns' task starts (kept: no allocation per step)
  std::vector<size_t> first_task_;  // panel_columns: each matrix's first task
  std::vector<const Matrix*> group_ws_;  // matmul_grouped's matrices
  std::vector<size_t> group_first_;      // and each product's first row in act_buf_
  std::vector<uint8_t> act_buf_;
  StreamedPtr<uint8_t> amx_buf_;
  size_t amx_capacity_ = 0;
  std::vector<kernels::ActBlockInfo> info_buf_;
  std::vector<std::vector<float>> scratch_;
  std::vector<std::pair<size_t, size_t>> tiles_;
  std::vector<MemRange> prefetch_;  // prefetch_during_next's ranges
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(ThreadPool& pool, BackendOptions opts) {
  return std::make_unique<CpuBackend>(pool, opts);
}

}  // namespace lift
