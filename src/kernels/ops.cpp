#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/fp16.h"
#include "kernels/isa.h"
#define LIFT_ATTENTION_NS attention_generic
#include "kernels/ops_attention_impl.h"
#undef LIFT_ATTENTION_NS

namespace lift::kernels {

// The fast attention and its exp are compiled once per instruction set (ops_attention_*.cpp,
// from ops_attention_impl.h); each translation unit defines these in its own namespace.
#define LIFT_DECLARE_ATTENTION(ns)                                                                 \
  namespace ns {                                                                                   \
  void attend_tile(const float* const* q, size_t n_q, const KvLayerView& kv, size_t kv_offset,     \
                   size_t head_dim, const int32_t* block_table, const int32_t* n_ctx, float scale, \
                   float* scratch, float* const* out, AttendMods mods);                            \
  void exp_lanes(const float* x, size_t n, float* y);                                              \
  void swiglu_lanes(const float* gate, const float* up, size_t n, float* out);                     \
  void geglu_lanes(const float* gate, const float* up, size_t n, float* out);                      \
  }
LIFT_DECLARE_ATTENTION(attention_avx2)
LIFT_DECLARE_ATTENTION(attention_avx512)
#undef LIFT_DECLARE_ATTENTION

namespace {

// One instruction set's versions.
struct AttentionKernels {
  decltype(&attention_generic::attend_tile) attend_tile;
  decltype(&attention_generic::exp_lanes) exp_lanes;
  decltype(&attention_generic::swiglu_lanes) swiglu_lanes;
  decltype(&attention_generic::geglu_lanes) geglu_lanes;
};

const AttentionKernels& attention_kernels() {
  static constexpr AttentionKernels kGeneric{
      attention_generic::attend_tile, attention_generic::exp_lanes, attention_generic::swiglu_lanes,
      attention_generic::geglu_lanes};
  static constexpr AttentionKernels kAvx2{attention_avx2::attend_tile, attention_avx2::exp_lanes,
                                          attention_avx2::swiglu_lanes,
                                          attention_avx2::geglu_lanes};
  static constexpr AttentionKernels kAvx512{
      attention_avx512::attend_tile, attention_avx512::exp_lanes, attention_avx512::swiglu_lanes,
      attention_avx512::geglu_lanes};
  switch (active_isa()) {
    case Isa::amx:
    case Isa::avx512:
      return kAvx512;
    case Isa::avx2:
      return kAvx2;
    default:
      return kGeneric;
  }
}

}  // namespace

void rmsnorm_row(const float* x, const float* weight, size_t dim, float eps, float* y) {
  // Eight independent double partial sums (lane j takes i = j mod 8), combined in a fixed
  // tree: written lane-wise so the compiler vectorizes it without reassociating.
  constexpr size_t kLanes = 8;
  double lane[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= dim; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane[j] += static_cast<double>(x[i + j]) * x[i + j];
  }
  for (size_t j = 0; i < dim; ++i, ++j) lane[j] += static_cast<double>(x[i]) * x[i];
  for (size_t w = kLanes / 2; w >= 1; w /= 2) {
    for (size_t j = 0; j < w; ++j) lane[j] += lane[j + w];
  }
  const double ss = lane[0];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
  for (size_t k = 0; k < dim; ++k) y[k] = x[k] * scale * weight[k];
}

void kv_store(const KvLayerView& kv, size_t slot, size_t e0, size_t e1, const float* k,
              const float* v) {
  // Run by run (a head's region of the cache, KvLayerView): K goes down a column of its
  // block's [dimension][slot] layout, and so does a transposed V; otherwise V is a row.
  const size_t bs = kv.block_size, run = kv.run();
  const size_t v_step = kv.v_transposed ? bs : 1;
  auto store = [&](auto* kd, auto* vd, auto convert) {
    for (size_t e = e0; e < e1;) {
      const size_t end = std::min(e1, (e / run + 1) * run);  // the rest of e's run
      auto* kt = kd + kv.k_index(slot, e);
      auto* vt = vd + kv.v_index(slot, e);
      for (size_t d = 0; e + d < end; ++d) {
        kt[d * bs] = convert(k[e + d]);
        vt[d * v_step] = convert(v[e + d]);
      }
      e = end;
    }
  };
  // The cache hands out its memory as const views; this is the one place that writes it.
  if (kv.type == GgmlType::F32) {
    store(static_cast<float*>(const_cast<void*>(kv.k)),
          static_cast<float*>(const_cast<void*>(kv.v)), [](float x) { return x; });
  } else {
    store(static_cast<uint16_t*>(const_cast<void*>(kv.k)),
          static_cast<uint16_t*>(const_cast<void*>(kv.v)), [](float x) { return f32_to_f16(x); });
  }
}

void rope_table(int32_t pos, size_t rope_dim, const float* inv_freq, float* cs, float mscale) {
  for (size_t i = 0; i < rope_dim / 2; ++i) {
    const double theta = static_cast<double>(pos) * inv_freq[i];
    cs[2 * i] = static_cast<float>(std::cos(theta) * mscale);
    cs[2 * i + 1] = static_cast<float>(std::sin(theta) * mscale);
  }
}

void rope_row(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, const float* cs,
              RopeStyle style) {
  const size_t pairs = rope_dim / 2;
  // Pair i is (v[i * step], v[i * step + other]).
  const size_t step = style == RopeStyle::neox ? 1 : 2;
  const size_t other = style == RopeStyle::neox ? pairs : 1;
  for (size_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < pairs; ++i) {
      float* pa = v + i * step;
      float* pb = pa + other;
      const float a = *pa, b = *pb, c = cs[2 * i], s = cs[2 * i + 1];
      *pa = a * c - b * s;
      *pb = a * s + b * c;
    }
  }
}

void geglu(const float* gate, const float* up, size_t n, float* out) {
  attention_kernels().geglu_lanes(gate, up, n, out);
}

void softcap_scores(float* x, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

// SwiGLU through the attention's exp: bitwise the same on every ISA (the reference backend
// shares it), and vectorized.
void swiglu(const float* gate, const float* up, size_t n, float* out) {
  attention_kernels().swiglu_lanes(gate, up, n, out);
}

void attend_tile(const float* const* q, size_t n_q, const KvLayerView& kv, size_t kv_offset,
                 size_t head_dim, const int32_t* block_table, const int32_t* n_ctx, float scale,
                 float* scratch, float* const* out, AttendMods mods) {
  attention_kernels().attend_tile(q, n_q, kv, kv_offset, head_dim, block_table, n_ctx, scale,
                                  scratch, out, mods);
}

void softmax_exp(const float* x, size_t n, float* y) { attention_kernels().exp_lanes(x, n, y); }

void attend_head(const float* q, const KvLayerView& kv, size_t kv_offset, size_t head_dim,
                 const int32_t* block_table, int32_t n_ctx, float scale, float* scratch, float* out,
                 AttendMods mods) {
  attend_tile(&q, 1, kv, kv_offset, head_dim, block_table, &n_ctx, scale, scratch, &out, mods);
}

void attend_head_reference(const float* q, const KvLayerView& kv, size_t kv_offset, size_t head_dim,
                           const int32_t* block_table, int32_t n_ctx, float scale, float* out,
                           AttendMods mods) {
  const size_t n = static_cast<size_t>(n_ctx), block_size = kv.block_size;
  const size_t w = static_cast<size_t>(mods.window);
  const size_t lo = (w > 0 && n > w) ? n - w : 0;  // the window's first position
  std::vector<double> score(n - lo);
  std::vector<float> row(head_dim);
  auto slot = [&](size_t p) {
    return static_cast<size_t>(block_table[p / block_size]) * block_size + p % block_size;
  };
  double mx = -INFINITY;
  for (size_t p = lo; p < n; ++p) {
    const float* k = attention_generic::load_k_row(kv, slot(p), kv_offset, head_dim, row.data());
    double d = 0;
    for (size_t i = 0; i < head_dim; ++i) d += static_cast<double>(q[i]) * k[i];
    double s = d * scale;
    if (mods.softcap > 0.0f) s = mods.softcap * std::tanh(s / mods.softcap);
    score[p - lo] = s;
    mx = std::max(mx, s);
  }
  double sum = 0;
  for (double& s : score) sum += (s = std::exp(s - mx));
  std::vector<double> acc(head_dim, 0.0);
  for (size_t p = lo; p < n; ++p) {
    const float* v = attention_generic::load_row(kv, slot(p), kv_offset, head_dim, row.data());
    for (size_t i = 0; i < head_dim; ++i) acc[i] += score[p - lo] / sum * v[i];
  }
  for (size_t i = 0; i < head_dim; ++i) out[i] = static_cast<float>(acc[i]);
}

}  // namespace lift::kernels
