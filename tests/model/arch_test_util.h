// Tiny random-weight GGUF files of any architecture lift knows (F32 weights, no vocabulary),
// and an independent float64 forward pass written from the published model definitions
// (Hugging Face transformers' Qwen3 and Gemma 3): what tests compare lift's logits with.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "kernels/quantize.h"
#include "temp_file.h"

namespace lift::test {

// Hyper-parameters of a tiny model and the features of its forward pass, each of which the
// oracle can leave out (to show that the comparison would catch its absence).
struct TinyArch {
  std::string arch = "qwen3";
  int dim = 32, layers = 2, heads = 4, kv_heads = 2, head_dim = 12, ffn = 40, vocab = 96;
  int ctx = 256;
  int value_length = 0;  // 0: head_dim
  float eps = 1e-6f;
  float rope_base = 1e6f;
  float rope_linear = 0.0f;      // rope.scaling.factor (linear), 0: none
  float yarn_factor = 0.0f;      // rope.scaling.factor (yarn), 0: none
  int yarn_orig_ctx = 0;         // rope.scaling.original_context_length
  bool yarn_ramp = true;         // the oracle's YaRN blends by its ramp (else linear for all)
  bool yarn_mscale = true;       // and scales cos, sin by 0.1 ln(factor) + 1
  float local_rope_base = 0.0f;  // sliding layers' base (Gemma 3: 10000), 0: as global
  int rope_dim = 0;              // rope.dimension_count, 0: head_dim (Phi-4-mini: 3/4 of it)
  // LongRoPE (Phi-3): random per-pair factor sets rope_factors_long/short, the original context
  // and rope.scaling.attn_factor (0: none written). The oracle divides the frequencies by the
  // long set when longrope_long, else by the short one, and scales cos and sin by the factor.
  bool longrope = false;
  int longrope_orig_ctx = 0;
  float longrope_attn = 0.0f;
  bool longrope_long = false;
  // Mixture of experts: `experts` SwiGLU experts of width expert_ffn, `experts_used` per token
  // (0: a dense FFN). The oracle renormalizes the chosen probabilities unless told not to.
  int experts = 0, experts_used = 0, expert_ffn = 0;
  bool moe_renormalize = true;
  int shared_ffn = 0;                    // Qwen2-MoE's shared expert of this width (0: none)
  bool shared_gate = true;               // the oracle scales it by sigmoid(ffn_gate_inp_shexp . x)
  GgmlType matrix_type = GgmlType::F32;  // the file's matrices (rows quantized by lift's codec)
  int window = 0;                        // sliding_window
  int window_pattern = 0;                // layer l global iff (l + 1) % pattern == 0; 0: all slide
  bool pattern_key = false;              // write window_pattern as attention.sliding_window_pattern
  bool neox = true;
  bool qk_norm = true;
  bool qkv_bias = false;
  bool post_norms = false;
  bool embed_scale = false;
  bool gelu = false;  // GeGLU (gelu tanh) instead of SwiGLU
  uint32_t seed = 1;
};

// Weights by GGUF tensor name: the values the file holds, in ggml order (ne0 contiguous).
using Weights = std::map<std::string, std::vector<float>>;

inline Weights tiny_weights(const TinyArch& a) {
  std::mt19937 rng(a.seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Weights w;
  auto mat = [&](const std::string& name, int n_in, int n_out, float scale) {
    auto& v = w[name];
    v.resize(static_cast<size_t>(n_in) * static_cast<size_t>(n_out));
    const float s = scale / std::sqrt(static_cast<float>(n_in));
    for (float& x : v) x = nd(rng) * s;
  };
  auto norm = [&](const std::string& name, int n) {
    auto& v = w[name];
    v.resize(static_cast<size_t>(n));
    for (float& x : v) x = 1.0f + 0.2f * nd(rng);
  };
  const int qd = a.heads * a.head_dim, kvd = a.kv_heads * a.head_dim;
  mat("token_embd.weight", a.dim, a.vocab, a.embed_scale ? 0.2f : 1.0f);
  if (a.longrope) {
    const size_t pairs = static_cast<size_t>(a.rope_dim > 0 ? a.rope_dim : a.head_dim) / 2;
    std::uniform_real_distribution<float> f_long(1.0f, 20.0f), f_short(1.0f, 2.0f);
    for (size_t i = 0; i < pairs; ++i) w["rope_factors_long.weight"].push_back(f_long(rng));
    for (size_t i = 0; i < pairs; ++i) w["rope_factors_short.weight"].push_back(f_short(rng));
  }
  norm("output_norm.weight", a.dim);
  for (int l = 0; l < a.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight", a.dim);
    norm(p + "ffn_norm.weight", a.dim);
    // Q and K large enough that attention is far from uniform: every feature then shows.
    mat(p + "attn_q.weight", a.dim, qd, 3.0f);
    mat(p + "attn_k.weight", a.dim, kvd, 3.0f);
    mat(p + "attn_v.weight", a.dim, kvd, 1.0f);
    mat(p + "attn_output.weight", qd, a.dim, 1.0f);
    if (a.experts > 0) {
      // Stacks [expert][n_out][n_in]; the router's logits spread wide enough to rank clearly.
      mat(p + "ffn_gate_inp.weight", a.dim, a.experts, 3.0f);
      mat(p + "ffn_gate_exps.weight", a.dim, a.expert_ffn * a.experts, 1.0f);
      mat(p + "ffn_up_exps.weight", a.dim, a.expert_ffn * a.experts, 1.0f);
      mat(p + "ffn_down_exps.weight", a.expert_ffn, a.dim * a.experts, 1.0f);
      if (a.shared_ffn > 0) {
        mat(p + "ffn_gate_inp_shexp.weight", a.dim, 1, 3.0f);
        mat(p + "ffn_gate_shexp.weight", a.dim, a.shared_ffn, 1.0f);
        mat(p + "ffn_up_shexp.weight", a.dim, a.shared_ffn, 1.0f);
        mat(p + "ffn_down_shexp.weight", a.shared_ffn, a.dim, 1.0f);
      }
    } else {
      mat(p + "ffn_gate.weight", a.dim, a.ffn, 1.0f);
      mat(p + "ffn_up.weight", a.dim, a.ffn, 1.0f);
      mat(p + "ffn_down.weight", a.ffn, a.dim, 1.0f);
    }
    if (a.qk_norm) {
      norm(p + "attn_q_norm.weight", a.head_dim);
      norm(p + "attn_k_norm.weight", a.head_dim);
    }
    if (a.qkv_bias) {
      mat(p + "attn_q.bias", 1, qd, 0.5f);
      mat(p + "attn_k.bias", 1, kvd, 0.5f);
      mat(p + "attn_v.bias", 1, kvd, 0.5f);
    }
    if (a.post_norms) {
      norm(p + "post_attention_norm.weight", a.dim);
      norm(p + "post_ffw_norm.weight", a.dim);
    }
  }
  return w;
}

// The metadata lift reads for `a`; callers may add keys or tensors before writing.
inline gguf::Writer tiny_writer(const TinyArch& a, const Weights& w) {
  gguf::Writer g;
  const std::string p = a.arch + ".";
  g.set_string("general.architecture", a.arch);
  g.set_string("general.name", "tiny-" + a.arch);
  g.set_u32(p + "context_length", static_cast<uint32_t>(a.ctx));
  g.set_u32(p + "embedding_length", static_cast<uint32_t>(a.dim));
  g.set_u32(p + "block_count", static_cast<uint32_t>(a.layers));
  g.set_u32(p + "feed_forward_length", static_cast<uint32_t>(a.ffn));
  g.set_u32(p + "attention.head_count", static_cast<uint32_t>(a.heads));
  g.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(a.kv_heads));
  g.set_u32(p + "attention.key_length", static_cast<uint32_t>(a.head_dim));
  g.set_u32(p + "attention.value_length",
            static_cast<uint32_t>(a.value_length > 0 ? a.value_length : a.head_dim));
  g.set_f32(p + "attention.layer_norm_rms_epsilon", a.eps);
  g.set_f32(p + "rope.freq_base", a.rope_base);
  if (a.rope_dim > 0) g.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(a.rope_dim));
  if (a.longrope) {
    g.set_u32(p + "rope.scaling.original_context_length",
              static_cast<uint32_t>(a.longrope_orig_ctx));
    if (a.longrope_attn > 0.0f) g.set_f32(p + "rope.scaling.attn_factor", a.longrope_attn);
  }
  if (a.rope_linear > 0.0f) {
    g.set_string(p + "rope.scaling.type", "linear");
    g.set_f32(p + "rope.scaling.factor", a.rope_linear);
  }
  if (a.yarn_factor > 0.0f) {
    g.set_string(p + "rope.scaling.type", "yarn");
    g.set_f32(p + "rope.scaling.factor", a.yarn_factor);
    g.set_u32(p + "rope.scaling.original_context_length", static_cast<uint32_t>(a.yarn_orig_ctx));
  }
  if (a.experts > 0) {
    g.set_u32(p + "expert_count", static_cast<uint32_t>(a.experts));
    g.set_u32(p + "expert_used_count", static_cast<uint32_t>(a.experts_used));
    g.set_u32(p + "expert_feed_forward_length", static_cast<uint32_t>(a.expert_ffn));
    if (a.shared_ffn > 0) {
      g.set_u32(p + "expert_shared_feed_forward_length", static_cast<uint32_t>(a.shared_ffn));
    }
  }
  if (a.pattern_key) {
    g.set_u32(p + "attention.sliding_window_pattern", static_cast<uint32_t>(a.window_pattern));
  }
  if (a.window > 0) g.set_u32(p + "attention.sliding_window", static_cast<uint32_t>(a.window));
  // Phi-3 fuses attn_qkv = [Q; K; V] and ffn_up = [gate; up] (rows appended).
  Weights file = w;
  if (a.arch == "phi3") {
    for (int l = 0; l < a.layers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      auto take = [&](const std::string& name) {
        std::vector<float> v = std::move(file.at(b + name));
        file.erase(b + name);
        return v;
      };
      std::vector<float> qkv = take("attn_q.weight"), gu = take("ffn_gate.weight");
      for (const char* n : {"attn_k.weight", "attn_v.weight"}) {
        const std::vector<float> v = take(n);
        qkv.insert(qkv.end(), v.begin(), v.end());
      }
      const std::vector<float> up = take("ffn_up.weight");
      gu.insert(gu.end(), up.begin(), up.end());
      file[b + "attn_qkv.weight"] = std::move(qkv);
      file[b + "ffn_up.weight"] = std::move(gu);
    }
  }
  for (const auto& [name, v] : file) {
    std::vector<uint64_t> ne;
    if (name.find("norm") != std::string::npos || name.find(".bias") != std::string::npos ||
        name.rfind("rope_factors", 0) == 0 || name.find("gate_inp_shexp") != std::string::npos) {
      ne = {v.size()};
    } else {
      // n_in is the first dimension: the row length of every matrix.
      const bool exps = name.find("_exps") != std::string::npos;
      const bool down = name.find("ffn_down") != std::string::npos;
      const bool out = name.find("attn_output") != std::string::npos;
      const uint64_t n_in = static_cast<uint64_t>(down  ? a.ffn
                                                  : out ? a.heads * a.head_dim
                                                        : a.dim);
      ne = {n_in, v.size() / n_in};
      if (exps) {
        const uint64_t e = static_cast<uint64_t>(a.experts);
        ne = {exps && down ? static_cast<uint64_t>(a.expert_ffn) : n_in, 0, e};
        ne[1] = v.size() / ne[0] / e;
      }
    }
    if (ne.size() > 1 && a.matrix_type != GgmlType::F32) {
      const size_t rows = v.size() / ne[0], row_bytes = ggml_row_bytes(a.matrix_type, ne[0]);
      std::vector<uint8_t> bytes(rows * row_bytes);
      for (size_t r = 0; r < rows; ++r) {
        kernels::quantize_row(a.matrix_type, v.data() + r * ne[0], bytes.data() + r * row_bytes,
                              ne[0]);
      }
      g.add_tensor(name, a.matrix_type, ne, std::move(bytes));
      continue;
    }
    std::vector<uint8_t> bytes(v.size() * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    g.add_tensor(name, GgmlType::F32, ne, std::move(bytes));
  }
  return g;
}

inline std::string write_tiny(const gguf::Writer& g, const std::string& tag) {
  const std::string path =
      ::testing::TempDir() + "lift-tiny-" + tag + "-" + std::to_string(::getpid()) + ".gguf";
  g.write(path);
  remove_at_exit(path);
  return path;
}

// The float64 forward pass: logits [n][vocab] of every position of `tokens`.
inline std::vector<double> oracle_logits(const TinyArch& a, const Weights& w,
                                         const std::vector<int32_t>& tokens) {
  const size_t n = tokens.size(), dim = static_cast<size_t>(a.dim);
  const size_t hd = static_cast<size_t>(a.head_dim), nh = static_cast<size_t>(a.heads);
  const size_t nkv = static_cast<size_t>(a.kv_heads), ffn = static_cast<size_t>(a.ffn);
  using Vec = std::vector<double>;
  // y = W x for W stored as n_out rows of n_in.
  auto linear = [](const std::vector<float>& W, const Vec& x, size_t n_out) {
    const size_t n_in = x.size();
    Vec y(n_out, 0.0);
    for (size_t o = 0; o < n_out; ++o) {
      for (size_t i = 0; i < n_in; ++i) y[o] += static_cast<double>(W[o * n_in + i]) * x[i];
    }
    return y;
  };
  auto rmsnorm = [&](const Vec& x, const float* weight, size_t off, size_t len) {
    double ss = 0;
    for (size_t i = 0; i < len; ++i) ss += x[off + i] * x[off + i];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(len) + a.eps);
    Vec y(len);
    for (size_t i = 0; i < len; ++i) y[i] = x[off + i] * r * weight[i];
    return y;
  };
  auto at = [&](const std::string& name) -> const std::vector<float>& { return w.at(name); };
  std::vector<Vec> x(n);
  for (size_t t = 0; t < n; ++t) {
    const float* e = at("token_embd.weight").data() + static_cast<size_t>(tokens[t]) * dim;
    x[t].assign(e, e + dim);
    if (a.embed_scale) {
      for (double& v : x[t]) v *= std::sqrt(static_cast<double>(dim));
    }
  }
  for (int l = 0; l < a.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool sliding = a.window > 0 && (a.window_pattern == 0 || (l + 1) % a.window_pattern != 0);
    const double base = (sliding && a.local_rope_base > 0.0f) ? a.local_rope_base : a.rope_base;
    const bool local = sliding && a.local_rope_base > 0.0f;
    const double pos_scale = local || a.rope_linear <= 0.0f ? 1.0 : 1.0 / a.rope_linear;
    // Per pair: the frequency (times pos_scale) and the magnitude of cos and sin. YaRN as the
    // transformers definition: interpolated (1/factor) and extrapolated (1) frequencies mixed by
    // a ramp between the correction dims of 32 and 1 rotations over the original context.
    const size_t rd = a.rope_dim > 0 ? static_cast<size_t>(a.rope_dim) : hd;  // rotated dims
    std::vector<double> freq(rd / 2);
    double mag = 1.0;
    for (size_t i = 0; i < rd / 2; ++i) {
      freq[i] = pos_scale * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rd));
    }
    // LongRoPE as transformers' Phi-3: inv_freq / ext_factor_i, cos and sin times the factor.
    if (a.longrope) {
      const auto& f =
          at(a.longrope_long ? "rope_factors_long.weight" : "rope_factors_short.weight");
      for (size_t i = 0; i < rd / 2; ++i) freq[i] /= f[i];
      if (a.longrope_attn > 0.0f) mag = a.longrope_attn;
    }
    if (a.yarn_factor > 0.0f && !local) {
      auto corr = [&](double rotations) {
        return static_cast<double>(rd) *
               std::log(a.yarn_orig_ctx / (rotations * 2.0 * std::numbers::pi)) /
               (2.0 * std::log(base));
      };
      const double low = std::max(0.0, std::floor(corr(32.0)));
      double high = std::min(static_cast<double>(rd) - 1.0, std::ceil(corr(1.0)));
      if (high == low) high += 0.001;
      for (size_t i = 0; i < rd / 2; ++i) {
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double extrapolation = a.yarn_ramp ? 1.0 - ramp : 0.0;
        freq[i] = freq[i] / a.yarn_factor * (1.0 - extrapolation) + freq[i] * extrapolation;
      }
      if (a.yarn_mscale) mag = 0.1 * std::log(a.yarn_factor) + 1.0;
    }
    std::vector<Vec> q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const Vec h = rmsnorm(x[t], at(p + "attn_norm.weight").data(), 0, dim);
      q[t] = linear(at(p + "attn_q.weight"), h, nh * hd);
      k[t] = linear(at(p + "attn_k.weight"), h, nkv * hd);
      v[t] = linear(at(p + "attn_v.weight"), h, nkv * hd);
      if (a.qkv_bias) {
        for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += at(p + "attn_q.bias")[i];
        for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += at(p + "attn_k.bias")[i];
        for (size_t i = 0; i < v[t].size(); ++i) v[t][i] += at(p + "attn_v.bias")[i];
      }
      // Per head: optional RMSNorm, then rotary embedding (rotate_half pairs i, i + hd/2 for
      // NEOX; adjacent pairs otherwise) by angle pos * freq[i], magnitude mag.
      auto head_ops = [&](Vec& vec, size_t heads, const std::string& norm) {
        for (size_t hh = 0; hh < heads; ++hh) {
          if (a.qk_norm) {
            const Vec nv = rmsnorm(vec, at(p + norm).data(), hh * hd, hd);
            std::copy(nv.begin(), nv.end(), vec.begin() + static_cast<ptrdiff_t>(hh * hd));
          }
          // Dimensions past rd pass through unrotated.
          for (size_t i = 0; i < rd / 2; ++i) {
            const double th = static_cast<double>(t) * freq[i];
            const size_t ia = hh * hd + (a.neox ? i : 2 * i);
            const size_t ib = a.neox ? ia + rd / 2 : ia + 1;
            const double x0 = vec[ia], x1 = vec[ib];
            vec[ia] = mag * (x0 * std::cos(th) - x1 * std::sin(th));
            vec[ib] = mag * (x1 * std::cos(th) + x0 * std::sin(th));
          }
        }
      };
      head_ops(q[t], nh, "attn_q_norm.weight");
      head_ops(k[t], nkv, "attn_k_norm.weight");
    }
    for (size_t t = 0; t < n; ++t) {
      Vec att(nh * hd, 0.0);
      for (size_t h = 0; h < nh; ++h) {
        const size_t kh = h / (nh / nkv);
        const size_t lo = sliding && t + 1 > static_cast<size_t>(a.window) ? t + 1 - a.window : 0;
        Vec s(t + 1, -INFINITY);
        double mx = -INFINITY;
        for (size_t u = lo; u <= t; ++u) {
          double d = 0;
          for (size_t i = 0; i < hd; ++i) d += q[t][h * hd + i] * k[u][kh * hd + i];
          s[u] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[u]);
        }
        double sum = 0;
        for (size_t u = lo; u <= t; ++u) sum += (s[u] = std::exp(s[u] - mx));
        for (size_t u = lo; u <= t; ++u) {
          for (size_t i = 0; i < hd; ++i) att[h * hd + i] += s[u] / sum * v[u][kh * hd + i];
        }
      }
      Vec o = linear(at(p + "attn_output.weight"), att, dim);
      if (a.post_norms) o = rmsnorm(o, at(p + "post_attention_norm.weight").data(), 0, dim);
      for (size_t i = 0; i < dim; ++i) x[t][i] += o[i];
      const Vec h = rmsnorm(x[t], at(p + "ffn_norm.weight").data(), 0, dim);
      // One SwiGLU/GeGLU FFN of width `width` whose matrices start at the given offsets.
      auto glu = [&](const std::string& gn, const std::string& un, const std::string& dn,
                     size_t width, size_t e) {
        const auto slice = [&](const std::string& name, size_t n_out, size_t n_in) {
          const std::vector<float>& all = at(name);
          return std::vector<float>(all.begin() + static_cast<ptrdiff_t>(e * n_out * n_in),
                                    all.begin() + static_cast<ptrdiff_t>((e + 1) * n_out * n_in));
        };
        const Vec g = linear(slice(gn, width, dim), h, width);
        const Vec up = linear(slice(un, width, dim), h, width);
        Vec act(width);
        for (size_t i = 0; i < width; ++i) {
          const double z = g[i];
          const double gate = a.gelu ? 0.5 * z *
                                           (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) *
                                                            (z + 0.044715 * z * z * z)))
                                     : z / (1.0 + std::exp(-z));
          act[i] = gate * up[i];
        }
        return linear(slice(dn, dim, width), act, dim);
      };
      Vec d(dim, 0.0);
      if (a.experts > 0) {
        // Mixtral / Qwen3-MoE routing: softmax over the router's logits, the experts_used most
        // probable (ties to the lower index), their probabilities renormalized.
        const size_t ne = static_cast<size_t>(a.experts);
        const Vec logit = linear(at(p + "ffn_gate_inp.weight"), h, ne);
        double mx = -INFINITY, z = 0.0;
        for (double lv : logit) mx = std::max(mx, lv);
        Vec prob(ne);
        for (size_t e = 0; e < ne; ++e) z += (prob[e] = std::exp(logit[e] - mx));
        for (double& pr : prob) pr /= z;
        std::vector<size_t> order(ne);
        for (size_t e = 0; e < ne; ++e) order[e] = e;
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t lhs, size_t rhs) { return prob[lhs] > prob[rhs]; });
        double chosen = 0.0;
        for (int j = 0; j < a.experts_used; ++j) chosen += prob[order[static_cast<size_t>(j)]];
        for (int j = 0; j < a.experts_used; ++j) {
          const size_t e = order[static_cast<size_t>(j)];
          const Vec y = glu(p + "ffn_gate_exps.weight", p + "ffn_up_exps.weight",
                            p + "ffn_down_exps.weight", static_cast<size_t>(a.expert_ffn), e);
          const double wgt = a.moe_renormalize ? prob[e] / chosen : prob[e];
          for (size_t i = 0; i < dim; ++i) d[i] += wgt * y[i];
        }
        if (a.shared_ffn > 0) {
          const Vec y = glu(p + "ffn_gate_shexp.weight", p + "ffn_up_shexp.weight",
                            p + "ffn_down_shexp.weight", static_cast<size_t>(a.shared_ffn), 0);
          const double g = linear(at(p + "ffn_gate_inp_shexp.weight"), h, 1)[0];
          const double scale = a.shared_gate ? 1.0 / (1.0 + std::exp(-g)) : 1.0;
          for (size_t i = 0; i < dim; ++i) d[i] += scale * y[i];
        }
      } else {
        d = glu(p + "ffn_gate.weight", p + "ffn_up.weight", p + "ffn_down.weight", ffn, 0);
      }
      if (a.post_norms) d = rmsnorm(d, at(p + "post_ffw_norm.weight").data(), 0, dim);
      for (size_t i = 0; i < dim; ++i) x[t][i] += d[i];
    }
  }
  std::vector<double> logits;
  for (size_t t = 0; t < n; ++t) {
    const Vec h = rmsnorm(x[t], at("output_norm.weight").data(), 0, dim);
    const Vec l = linear(at("token_embd.weight"), h, static_cast<size_t>(a.vocab));
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

}  // namespace lift::test
