// The small interface between the model and the machine. The model describes *what* to
// compute (matrix products, norms, rotary embeddings, attention over paged K/V); a backend
// decides *how*. CpuBackend is the fast path, ReferenceBackend the scalar, double-accumulating
// oracle of the exactness contract; a GPU backend would be a third implementation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "gguf/ggml_type.h"

namespace lift {

class ThreadPool;
namespace kernels {
struct PanelMatrix;
}

// A weight matrix in its stored type: n_out rows of n_in elements. `panel`, when set, is the
// same matrix repacked at load time for the CPU kernels (kernels/panel.h); backends that do not
// use it read `data`.
struct Matrix {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  size_t n_in = 0;
  size_t n_out = 0;
  size_t row_bytes = 0;
  const kernels::PanelMatrix* panel = nullptr;
};

// One layer of the paged K/V store. A sequence's position p lives in slot
// block_table[p / block_size]*block_size + p % block_size. K is stored transposed within each
// block, [kv_dim][block_size], so that one dimension of a block's keys is contiguous and
// attention scores 16 keys with plain vector FMAs. V is stored in runs of v_run dimensions:
// within a block, [kv_dim / v_run][block_size][v_run], so that one head's V rows of a block are
// one contiguous run of block_size x head_dim when v_run is the head size (what a KV cache
// stores: a decode step reads them from DRAM, and scattered rows stream slower) and plain rows
// by slot, [slot][kv_dim], when v_run is kv_dim (0 means kv_dim). Narrow heads
// (v_transposed_for) store V like K instead: their attention multiplies 16 positions' v[d] at
// once (kernels/ops_attention_impl.h).
struct KvLayerView {
  GgmlType type = GgmlType::F32;  // storage type of K and V: F32 or F16
  const void* k = nullptr;
  const void* v = nullptr;
  size_t kv_dim = 0;
  size_t block_size = 0;
  bool v_transposed = false;  // V in K's layout
  size_t v_run = 0;           // dimensions per run, one head's (0: kv_dim, a single run)
  // Elements from one run's region to the next. The cache keeps each run (a K/V head) in a
  // region of its own, every block's share of it one after the other, so that a head's blocks,
  // handed out in order, lie in one ascending stream the hardware prefetchers follow (a decode
  // token's attention reads a head's K and V block by block). With one run, unused.
  size_t head_stride = 0;

  size_t run() const { return v_run == 0 ? kv_dim : v_run; }
  // Element e (< kv_dim) of slot s, counted in elements of `type`: within a run's region,
  // [block][dimension][slot in block] for K (and a transposed V), [block][slot][dimension] for V.
  size_t k_index(size_t s, size_t e) const {
    const size_t r = run();
    return e / r * head_stride + (s / block_size * r + e % r) * block_size + s % block_size;
  }
  size_t v_index(size_t s, size_t e) const {
    if (v_transposed) return k_index(s, e);
    const size_t r = run();
    return e / r * head_stride + s * r + e % r;
  }
};

// The widest head whose V a KV cache stores transposed.
inline constexpr size_t kNarrowHeadDim = 16;
inline bool v_transposed_for(size_t head_dim) { return head_dim <= kNarrowHeadDim; }

// How rotary embedding pairs a head's dimensions: (2i, 2i + 1) as in GGUF's Llama Q/K rows, or
// (i, i + rope_dim / 2) as GPT-NeoX, Qwen, Phi-3 and Gemma keep them.
enum class RopeStyle { adjacent, neox };

struct AttentionArgs {
  const float* q = nullptr;  // [n_tokens][n_heads*head_dim], rotary already applied
  float* out = nullptr;      // [n_tokens][n_heads*head_dim]
  size_t n_tokens = 0;
  size_t n_heads = 0;
  size_t n_kv_heads = 0;
  size_t head_dim = 0;
  float scale = 1.0f;
  float softcap = 0.0f;  // scores become softcap * tanh(score / softcap); 0: none
  int32_t window = 0;    // sliding window (p - q < window), 0: whole context
  KvLayerView kv;
  const int32_t* const* block_tables = nullptr;  // per token: its sequence's block table
  const int32_t* n_ctx = nullptr;                // per token: positions to attend (pos + 1)
  // The batch's own K/V rows ([n_tokens][kv.kv_dim], rotated) when the cache does not hold them
  // yet: the attention stores token t's at cache slot slots[t] (kernels::kv_store) before any
  // query reads them. nullptr: stored already.
  const float* k_new = nullptr;
  const float* v_new = nullptr;
  const size_t* slots = nullptr;
};

// The activation rows of a product: n rows, of which the first n_prompt are prompt tokens and
// the rest generated tokens (kernels::RowKind). A backend may compute the two kinds with
// different kernels; a row's result never depends on the other rows of the call.
struct Rows {
  size_t n = 0;
  size_t n_prompt = 0;
};

// One product of a group (Backend::matmul_grouped): y = W x over its own activation rows.
struct Product {
  const Matrix* w = nullptr;
  const float* x = nullptr;
  Rows rows;
  float* y = nullptr;
};

// Bytes a backend may fetch ahead of use (Backend::prefetch_during_next).
struct MemRange {
  const void* p = nullptr;
  size_t bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // y[r*n_out + o] = sum_i W[o][i] * x[r*n_in + i] for r < rows.n.
  virtual void matmul(const Matrix& w, const float* x, Rows rows, float* y) = 0;
  // ys[i] = ws[i] x for i < n: products of the same activations (Q/K/V, gate/up), which a
  // backend may quantize once and schedule together. Each result is what matmul() gives.
  virtual void matmul_many(const Matrix* const* ws, float* const* ys, size_t n, const float* x,
                           Rows rows) {
    for (size_t i = 0; i < n; ++i) matmul(*ws[i], x, rows, ys[i]);
  }
  // Products of different activations (a mixture of experts' chosen experts, each over its own
  // tokens), which a backend may run as one job. Each result is what matmul() gives.
  virtual void matmul_grouped(std::span<const Product> ps) {
    for (const Product& p : ps) matmul(*p.w, p.x, p.rows, p.y);
  }
  // Row r of the embedding table, dequantized, for each id.
  virtual void get_rows(const Matrix& table, const int32_t* ids, size_t n, float* out) = 0;
  virtual void rmsnorm(const float* x, const float* weight, size_t n_rows, size_t dim, float eps,
                       float* y) = 0;
  // Rotates pair i (by `style`) of the first rope_dim dims of each head of row r by the angle
  // whose cos, sin are cs[r * rope_dim + 2i], cs[r * rope_dim + 2i + 1] (kernels::rope_table).
  virtual void rope(float* x, size_t n_rows, size_t n_heads, size_t head_dim, size_t rope_dim,
                    const float* cs, RopeStyle style = RopeStyle::adjacent) = 0;
  // out[i] = silu(gate[i]) * up[i]
  virtual void swiglu(const float* gate, const float* up, size_t n, float* out) = 0;
  // out[i] = gelu_tanh(gate[i]) * up[i]
  virtual void geglu(const float* gate, const float* up, size_t n, float* out) = 0;
  // x[r * dim + i] += bias[i]
  virtual void add_bias(float* x, size_t n_rows, size_t dim, const float* bias) = 0;
  // x[i] = cap * tanh(x[i] / cap)
  virtual void softcap(float* x, size_t n, float cap) = 0;
  virtual void attention(const AttentionArgs& a) = 0;
  // Memory read soon after the next product (the K/V its layer's attention reads): a backend
  // may fetch it into cache while that product's last tasks leave a core idle. A hint only,
  // for the next product; the ranges must stay valid until it returns.
  virtual void prefetch_during_next(std::span<const MemRange> ranges) { (void)ranges; }

  virtual const char* name() const = 0;
  // Whether products run on one tensor-parallel rank's share of the rows (parallel/tp_backend.h),
  // the only way to run a model loaded for one rank.
  virtual bool tensor_parallel() const { return false; }
  // The kernels of this process alone, for a model loaded whole next to a sharded one (a
  // speculative draft model on the tensor-parallel leader).
  virtual Backend& local() { return *this; }
};

struct BackendOptions {
  // Quantize activations to 8 bits before int8 dot products with quantized weights (fast,
  // as llama.cpp does). Off: every weight is dequantized exactly and multiplied in f32.
  bool quantize_activations = true;
};

std::unique_ptr<Backend> make_cpu_backend(ThreadPool& pool, BackendOptions opts = {});
std::unique_ptr<Backend> make_reference_backend(BackendOptions opts = {});

}  // namespace lift
