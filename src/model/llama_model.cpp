#include "model/llama_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <numbers>
#include <system_error>
#include <thread>

#include "kernels/dequant.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace lift {

namespace {

std::string shape_str(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

const gguf::TensorInfo& expect(const gguf::File& f, const std::string& name, uint64_t ne0,
                               uint64_t ne1) {
  const gguf::TensorInfo& t = f.tensor(name);
  const bool ok = (ne1 == 0) ? (t.n_dims == 1 && t.ne[0] == ne0)
                             : (t.n_dims == 2 && t.ne[0] == ne0 && t.ne[1] == ne1);
  if (!ok) {
    throw Error(f.path() + ": tensor '" + name + "' has shape " + shape_str(t) + ", expected [" +
                std::to_string(ne0) + (ne1 ? ", " + std::to_string(ne1) : "") +
                "] from the model's metadata");
  }
  return t;
}

void check_type(const gguf::File& f, const std::string& name, const gguf::TensorInfo& t) {
  if (!ggml_type_supported(t.type)) {
    throw Error(f.path() + ": tensor '" + name + "' has type " +
                std::string(ggml_type_name(t.type)) +
                ", which lift cannot compute with yet (supported: F32, F16, BF16, Q8_0, Q4_0, "
                "Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS)");
  }
}

Matrix matrix(const gguf::File& f, const std::string& name, uint64_t n_in, uint64_t n_out) {
  const gguf::TensorInfo& t = expect(f, name, n_in, n_out);
  check_type(f, name, t);
  return Matrix{t.type, t.data, n_in, n_out, ggml_row_bytes(t.type, n_in)};
}

// A stack of n_mat matrices [n_mat][n_out][n_in] (the experts' *_exps tensors), as one matrix
// of n_mat * n_out rows: matrix e is rows [e * n_out, (e + 1) * n_out).
Matrix stacked(const gguf::File& f, const std::string& name, uint64_t n_in, uint64_t n_out,
               uint64_t n_mat) {
  const gguf::TensorInfo& t = f.tensor(name);
  if (t.n_dims != 3 || t.ne[0] != n_in || t.ne[1] != n_out || t.ne[2] != n_mat) {
    throw Error(f.path() + ": tensor '" + name + "' has shape " + shape_str(t) + ", expected [" +
                std::to_string(n_in) + ", " + std::to_string(n_out) + ", " + std::to_string(n_mat) +
                "] from the model's metadata");
  }
  check_type(f, name, t);
  return Matrix{t.type, t.data, n_in, n_out * n_mat, ggml_row_bytes(t.type, n_in)};
}

std::vector<float> vector_f32(const gguf::File& f, const std::string& name, uint64_t n) {
  const gguf::TensorInfo& t = expect(f, name, n, 0);
  if (!ggml_type_supported(t.type)) {
    throw Error(f.path() + ": tensor '" + name + "' has unsupported type " +
                std::string(ggml_type_name(t.type)));
  }
  std::vector<float> out(n);
  kernels::dequantize_row(t.type, t.data, out.data(), n);
  return out;
}

// Rows [first, first + n_out) of a matrix: one of the products a fused tensor holds.
Matrix rows_of(const Matrix& m, uint64_t first, uint64_t n_out) {
  Matrix v = m;
  v.data = m.data + first * m.row_bytes;
  v.n_out = n_out;
  return v;
}

}  // namespace

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, TpShard shard) {
  return from_file(gguf::File::open(path), shard);
}

std::unique_ptr<LlamaModel> LlamaModel::from_file(gguf::File file, TpShard shard) {
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(file), shard));
}

LlamaModel::LlamaModel(gguf::File file, TpShard shard) : file_(std::move(file)), shard_(shard) {
  cfg_ = ModelConfig::from_gguf(file_);
  if (cfg_.n_experts > 0 && !shard_.whole()) {
    throw Error(file_.path() +
                ": mixture-of-experts models do not run with tensor parallelism (--tp) yet");
  }
  const uint64_t dim = static_cast<uint64_t>(cfg_.dim);
  const uint64_t vocab = static_cast<uint64_t>(cfg_.n_vocab);
  token_embd_ = matrix(file_, "token_embd.weight", dim, vocab);
  output_norm_ = vector_f32(file_, "output_norm.weight", dim);
  tied_ = file_.find_tensor("output.weight") == nullptr;
  output_ = tied_ ? token_embd_ : matrix(file_, "output.weight", dim, vocab);
  layers_.resize(static_cast<size_t>(cfg_.n_layers));
  for (int l = 0; l < cfg_.n_layers; ++l) load_layer(l);
  init_rope();
  // A tensor the table does not name would be silently ignored (a bias, a norm, rope factors
  // of another scheme): the function would not be the file's.
  for (const auto& t : file_.tensors()) {
    bool known = t.name == "token_embd.weight" || t.name == "output_norm.weight" ||
                 t.name == "output.weight" ||
                 (cfg_.spec.rope_freqs && t.name == "rope_freqs.weight") ||
                 (cfg_.spec.rope_factor_sets &&
                  (t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight"));
    for (int l = 0; l < cfg_.n_layers && !known; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      if (t.name.rfind(p, 0) != 0) continue;
      const std::string_view rest = t.name.substr(p.size());
      const auto& s = cfg_.spec;
      const bool moe = cfg_.n_experts > 0;
      known =
          rest == "attn_norm.weight" || rest == "attn_output.weight" || rest == "ffn_norm.weight" ||
          (moe ? (rest == "ffn_gate_inp.weight" || rest == "ffn_gate_exps.weight" ||
                  rest == "ffn_up_exps.weight" || rest == "ffn_down_exps.weight" ||
                  (s.shared_expert &&
                   (rest == "ffn_gate_inp_shexp.weight" || rest == "ffn_gate_shexp.weight" ||
                    rest == "ffn_up_shexp.weight" || rest == "ffn_down_shexp.weight")))
               : (rest == "ffn_up.weight" || rest == "ffn_down.weight" ||
                  (!s.fused_up && rest == "ffn_gate.weight"))) ||
          (s.fused_qkv
               ? rest == "attn_qkv.weight"
               : (rest == "attn_q.weight" || rest == "attn_k.weight" || rest == "attn_v.weight")) ||
          (s.qkv_bias &&
           (rest == "attn_q.bias" || rest == "attn_k.bias" || rest == "attn_v.bias")) ||
          (s.qk_norm && (rest == "attn_q_norm.weight" || rest == "attn_k_norm.weight")) ||
          (s.post_norms &&
           (rest == "post_attention_norm.weight" || rest == "post_ffw_norm.weight"));
    }
    if (!known) {
      throw Error(file_.path() + ": tensor '" + std::string(t.name) +
                  "' is not part of architecture '" + cfg_.arch +
                  "' as lift implements it (it would be ignored)");
    }
  }
  for (const auto& t : file_.tensors()) weight_bytes_ += t.n_bytes;
  pack_weights();
}

void LlamaModel::load_layer(int l) {
  const ArchSpec& s = cfg_.spec;
  const uint64_t dim = static_cast<uint64_t>(cfg_.dim), qd = static_cast<uint64_t>(cfg_.q_dim());
  const uint64_t kvd = static_cast<uint64_t>(cfg_.kv_dim());
  const uint64_t ffn = static_cast<uint64_t>(cfg_.ffn_dim),
                 hd = static_cast<uint64_t>(cfg_.head_dim);
  const std::string p = "blk." + std::to_string(l) + ".";
  LayerWeights& w = layers_[static_cast<size_t>(l)];
  w.attn_norm = vector_f32(file_, p + "attn_norm.weight", dim);
  w.ffn_norm = vector_f32(file_, p + "ffn_norm.weight", dim);
  if (s.fused_qkv) {
    const Matrix qkv = matrix(file_, p + "attn_qkv.weight", dim, qd + 2 * kvd);
    w.wq = rows_of(qkv, 0, qd);
    w.wk = rows_of(qkv, qd, kvd);
    w.wv = rows_of(qkv, qd + kvd, kvd);
  } else {
    w.wq = matrix(file_, p + "attn_q.weight", dim, qd);
    w.wk = matrix(file_, p + "attn_k.weight", dim, kvd);
    w.wv = matrix(file_, p + "attn_v.weight", dim, kvd);
  }
  w.wo = matrix(file_, p + "attn_output.weight", qd, dim);
  if (cfg_.n_experts > 0) {
    const uint64_t ne = static_cast<uint64_t>(cfg_.n_experts),
                   eff = static_cast<uint64_t>(cfg_.expert_ffn_dim);
    w.router = matrix(file_, p + "ffn_gate_inp.weight", dim, ne);
    const Matrix gate = stacked(file_, p + "ffn_gate_exps.weight", dim, eff, ne);
    const Matrix up = stacked(file_, p + "ffn_up_exps.weight", dim, eff, ne);
    const Matrix down = stacked(file_, p + "ffn_down_exps.weight", eff, dim, ne);
    for (uint64_t e = 0; e < ne; ++e) {
      w.e_gate.push_back(rows_of(gate, e * eff, eff));
      w.e_up.push_back(rows_of(up, e * eff, eff));
      w.e_down.push_back(rows_of(down, e * dim, dim));
    }
    if (s.shared_expert) {
      const uint64_t sff = static_cast<uint64_t>(cfg_.shared_expert_ffn_dim);
      const gguf::TensorInfo& g = expect(file_, p + "ffn_gate_inp_shexp.weight", dim, 0);
      check_type(file_, p + "ffn_gate_inp_shexp.weight", g);
      w.s_gate_inp = Matrix{g.type, g.data, dim, 1, ggml_row_bytes(g.type, dim)};
      w.s_gate = matrix(file_, p + "ffn_gate_shexp.weight", dim, sff);
      w.s_up = matrix(file_, p + "ffn_up_shexp.weight", dim, sff);
      w.s_down = matrix(file_, p + "ffn_down_shexp.weight", sff, dim);
    }
  } else if (s.fused_up) {
    const Matrix up = matrix(file_, p + "ffn_up.weight", dim, 2 * ffn);
    w.w_gate = rows_of(up, 0, ffn);
    w.w_up = rows_of(up, ffn, ffn);
  } else {
    w.w_gate = matrix(file_, p + "ffn_gate.weight", dim, ffn);
    w.w_up = matrix(file_, p + "ffn_up.weight", dim, ffn);
  }
  if (cfg_.n_experts == 0) w.w_down = matrix(file_, p + "ffn_down.weight", ffn, dim);
  if (s.qkv_bias) {
    w.bq = vector_f32(file_, p + "attn_q.bias", qd);
    w.bk = vector_f32(file_, p + "attn_k.bias", kvd);
    w.bv = vector_f32(file_, p + "attn_v.bias", kvd);
  }
  if (s.qk_norm) {
    w.q_norm = vector_f32(file_, p + "attn_q_norm.weight", hd);
    w.k_norm = vector_f32(file_, p + "attn_k_norm.weight", hd);
  }
  if (s.post_norms) {
    w.post_attn_norm = vector_f32(file_, p + "post_attention_norm.weight", dim);
    w.post_ffn_norm = vector_f32(file_, p + "post_ffw_norm.weight", dim);
  }
}

void LlamaModel::init_rope() {
  // theta_i = pos * s_i * base^(-2i/rope_dim) / factor_i (factor_i from rope_freqs, Llama 3's
  // frequency scaling; 1 without it), computed in double and rounded once. s_i is freq_scale
  // for linear scaling; for YaRN it blends freq_scale (mix 0) and 1 (mix 1) by its ramp over
  // the pairs, from how many turns pair i makes over the original context.
  const size_t pairs = static_cast<size_t>(cfg_.rope_dim / 2);
  auto factors_of = [&](const char* name) {
    std::vector<float> v = vector_f32(file_, name, pairs);
    for (float x : v) {
      // Finite: an infinite factor would quietly stop the pair's rotation.
      if (!(x > 0.0f && x <= 1e6f)) {
        throw Error(file_.path() + ": " + name + " holds " + std::to_string(x) +
                    ", outside (0, 1e6]");
      }
    }
    return v;
  };
  std::vector<float> factors(pairs, 1.0f);
  if (cfg_.spec.rope_freqs && file_.find_tensor("rope_freqs.weight")) {
    factors = factors_of("rope_freqs.weight");
  }
  if (cfg_.spec.rope_factor_sets) {
    const bool has_long = file_.find_tensor("rope_factors_long.weight") != nullptr;
    const bool has_short = file_.find_tensor("rope_factors_short.weight") != nullptr;
    if (has_long != has_short) {
      throw Error(file_.path() + ": " +
                  (has_long ? "rope_factors_long.weight without rope_factors_short.weight"
                            : "rope_factors_short.weight without rope_factors_long.weight"));
    }
    if (has_long) {
      factor_set_ = long_factors_ ? "long" : "short";
      factors =
          factors_of(long_factors_ ? "rope_factors_long.weight" : "rope_factors_short.weight");
    }
  }
  const double d = cfg_.rope_dim;
  auto fill = [&](std::vector<float>& out, double base, double freq_scale, bool yarn) {
    // The pair index at which a pair makes `turns` turns over the original context.
    auto pair_at = [&](double turns) {
      return d * std::log(cfg_.yarn.orig_ctx / (turns * 2.0 * std::numbers::pi)) /
             (2.0 * std::log(base));
    };
    const double lo = yarn ? std::max(0.0, std::floor(pair_at(cfg_.yarn.beta_fast))) : 0.0;
    const double hi = yarn ? std::min(d - 1.0, std::ceil(pair_at(cfg_.yarn.beta_slow))) : 0.0;
    out.resize(pairs);
    for (size_t i = 0; i < pairs; ++i) {
      double s = freq_scale;
      if (yarn) {
        const double ramp =
            std::clamp((static_cast<double>(i) - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
        const double mix = 1.0 - ramp;  // 1: unscaled (fast pairs), 0: scaled (slow pairs)
        s = freq_scale * (1.0 - mix) + mix;
      }
      out[i] =
          static_cast<float>(s * std::pow(base, -2.0 * static_cast<double>(i) / d) / factors[i]);
    }
  };
  fill(inv_freq_[0], cfg_.rope_base, cfg_.rope_freq_scale, cfg_.yarn.on);
  rope_mscale_ = cfg_.yarn.on
                     ? static_cast<float>(cfg_.yarn.attn_factor *
                                          (1.0 + 0.1 * std::log(1.0 / cfg_.rope_freq_scale)))
                     : static_cast<float>(cfg_.rope_attn_factor);
  if (cfg_.spec.local_rope_base > 0.0f) fill(inv_freq_[1], cfg_.spec.local_rope_base, 1.0, false);
}

void LlamaModel::set_context_length(size_t max_len) {
  const bool want_long = max_len > static_cast<size_t>(cfg_.rope_orig_ctx);
  if (want_long == long_factors_) return;
  long_factors_ = want_long;
  init_rope();
}

void LlamaModel::pack_weights() {
  std::vector<Matrix*> todo{&output_};
  for (LayerWeights& w : layers_) {
    for (Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down, &w.router,
                      &w.s_gate, &w.s_up, &w.s_down}) {
      if (m->data != nullptr) todo.push_back(m);
    }
    for (auto* es : {&w.e_gate, &w.e_up, &w.e_down}) {
      for (Matrix& m : *es) todo.push_back(&m);
    }
  }
  std::erase_if(todo, [](const Matrix* m) { return !kernels::panel_supported(m->type); });
  // Matrices pack independently: spread them over the cores (one core repacks an 8B model's
  // K-quants in tens of seconds). The first error wins; the others' work is dropped.
  std::vector<kernels::PanelMatrix> packed(todo.size());
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
      try {
        const Matrix& m = *todo[i];
        const auto [b, e] = tp_share(m.n_out, shard_.rank, shard_.size);
        if (e > b) {
          packed[i] =
              kernels::pack_panels(m.type, m.data + b * m.row_bytes, m.row_bytes, m.n_in, e - b);
        } else {  // a tensor-parallel rank with none of this matrix's rows
          packed[i].type = m.type;
          packed[i].n_in = m.n_in;
        }
        packed[i].row0 = b;
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  const size_t n_threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), todo.size());
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer threads (the caller's included) do the rest
    }
  }
  work();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  for (size_t i = 0; i < todo.size(); ++i) {
    Matrix* m = todo[i];
    panels_.push_back(std::move(packed[i]));
    m->panel = &panels_.back();
    // The panels are the copy products read; the file's pages need not stay resident (they
    // come back from the file if a lookup or another backend reads the rows).
    file_.release(m->data, m->n_out * m->row_bytes);
  }
}

void LlamaModel::moe_ffn(Backend& be, const LayerWeights& w, Rows rows) {
  const size_t n = rows.n, dim = static_cast<size_t>(cfg_.dim);
  const size_t ne = static_cast<size_t>(cfg_.n_experts),
               used = static_cast<size_t>(cfg_.n_experts_used),
               eff = static_cast<size_t>(cfg_.expert_ffn_dim);
  be.matmul(w.router, xn_.data(), rows, router_logits_.data());
  for (auto& s : expert_slots_) s.clear();
  // Per token: its `used` experts by router logit (ties to the lower index; NaN never wins
  // over a number), weighted by their softmax probabilities renormalized over the chosen ones
  // (Mixtral, Qwen3-MoE), in double. Only the token's own logits decide: batch-invariant.
  for (size_t i = 0; i < n; ++i) {
    const float* lg = router_logits_.data() + i * ne;
    int32_t* ex = slot_expert_.data() + i * used;
    for (size_t j = 0; j < used; ++j) {
      int32_t best = -1;
      for (size_t e = 0; e < ne; ++e) {
        if (std::find(ex, ex + j, static_cast<int32_t>(e)) != ex + j) continue;
        if (best < 0 || lg[e] > lg[best] || (std::isnan(lg[best]) && !std::isnan(lg[e]))) {
          best = static_cast<int32_t>(e);
        }
      }
      ex[j] = best;
    }
    double p[64], sum = 0.0, all = 0.0;  // used <= 64 (ModelConfig)
    const double top = lg[ex[0]];
    for (size_t j = 0; j < used; ++j) {
      p[j] = std::exp(static_cast<double>(lg[ex[j]]) - top);
      sum += p[j];
    }
    // Without renormalization the softmax over every expert.
    if (!cfg_.spec.moe_renormalize) {
      for (size_t e = 0; e < ne; ++e) all += std::exp(static_cast<double>(lg[e]) - top);
    }
    for (size_t j = 0; j < used; ++j) {
      slot_weight_[i * used + j] =
          static_cast<float>(cfg_.spec.moe_renormalize ? p[j] / sum : p[j] / all);
      expert_slots_[static_cast<size_t>(ex[j])].push_back(static_cast<uint32_t>(i * used + j));
    }
  }
  // Each chosen expert once, over its tokens in batch order (prompt rows first, as in the
  // batch), all experts' rows side by side: gate and up of every expert as one grouped product,
  // then every down projection as another.
  products_.clear();
  down_products_.clear();
  size_t at = 0;
  for (size_t e = 0; e < ne; ++e) {
    const std::vector<uint32_t>& slots = expert_slots_[e];
    if (slots.empty()) continue;
    const size_t m = slots.size();
    size_t m_prompt = 0;
    for (size_t r = 0; r < m; ++r) {
      const size_t token = slots[r] / used;
      m_prompt += token < rows.n_prompt;
      slot_pos_[slots[r]] = static_cast<uint32_t>(at + r);
      std::memcpy(moe_x_.data() + (at + r) * dim, xn_.data() + token * dim, dim * sizeof(float));
    }
    const Rows er{m, m_prompt};
    products_.push_back({&w.e_gate[e], moe_x_.data() + at * dim, er, gate_.data() + at * eff});
    products_.push_back({&w.e_up[e], moe_x_.data() + at * dim, er, up_.data() + at * eff});
    down_products_.push_back(
        {&w.e_down[e], hidden_.data() + at * eff, er, moe_y_.data() + at * dim});
    at += m;
  }
  be.matmul_grouped(products_);
  be.swiglu(gate_.data(), up_.data(), at * eff, hidden_.data());
  be.matmul_grouped(down_products_);
  // The weighted sum, the token's slots in order.
  for (size_t i = 0; i < n; ++i) {
    float* out = proj_.data() + i * dim;
    for (size_t d = 0; d < dim; ++d) out[d] = 0.0f;
    for (size_t j = 0; j < used; ++j) {
      const float wj = slot_weight_[i * used + j];
      const float* y = moe_y_.data() + slot_pos_[i * used + j] * dim;
      for (size_t d = 0; d < dim; ++d) out[d] += wj * y[d];
    }
  }
  if (!cfg_.spec.shared_expert) return;
  // The shared expert over every token, gated by sigmoid(s_gate_inp . x), added last.
  const size_t sff = static_cast<size_t>(cfg_.shared_expert_ffn_dim);
  const Matrix* ws[] = {&w.s_gate, &w.s_up};
  float* ys[] = {gate_.data(), up_.data()};
  be.matmul_many(ws, ys, 2, xn_.data(), rows);
  be.swiglu(gate_.data(), up_.data(), n * sff, hidden_.data());
  be.matmul(w.s_down, hidden_.data(), rows, moe_y_.data());
  be.matmul(w.s_gate_inp, xn_.data(), rows, shared_gate_.data());
  for (size_t i = 0; i < n; ++i) {
    const float g =
        static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(shared_gate_[i]))));
    float* out = proj_.data() + i * dim;
    const float* y = moe_y_.data() + i * dim;
    for (size_t d = 0; d < dim; ++d) out[d] += g * y[d];
  }
}

// A decode step's weights push each layer's K/V, and every other small thing it reads, out of
// the caches before the layer comes round again; what follows a product then waits on memory
// (attention over a short context is little more than that wait, an RMSNorm half of it on its
// weights). Named before the product, they come in while its last tasks leave a core idle.
// K/V from each sequence's first block in view on, up to kKvHintBytes (a long context's later
// blocks are fetched ahead by the attention itself).
void LlamaModel::hint_kv_reads(Backend& be, const ForwardBatch& batch, const KvCache& kv, int layer,
                               std::initializer_list<const std::vector<float>*> also) {
  constexpr size_t kKvHintBytes = 256 << 10;
  const size_t n = batch.tokens.size(), bs = kv.block_size();
  const size_t window = static_cast<size_t>(cfg_.window(layer));
  const size_t l = static_cast<size_t>(layer);
  hints_.clear();
  for (const std::vector<float>* v : also) {
    if (!v->empty()) hints_.push_back({v->data(), v->size() * sizeof(float)});
  }
  size_t bytes = 0;
  for (size_t i = 0; i < n && bytes < kKvHintBytes; ++i) {
    // A sequence's next token in the batch reads all that this one does.
    if (i + 1 < n && batch.block_tables[i + 1] == batch.block_tables[i]) continue;
    const size_t ctx = static_cast<size_t>(n_ctx_[i]);
    const size_t lo = window > 0 && ctx > window ? ctx - window : 0;
    for (size_t b = lo / bs; b * bs < ctx && bytes < kKvHintBytes; ++b) {
      const int32_t block = batch.block_tables[i][b];
      for (size_t r = 0; r < kv.n_runs(); ++r) {
        hints_.push_back(kv.k_block(l, block, r));
        hints_.push_back(kv.v_block(l, block, r));
        bytes += 2 * hints_.back().bytes;
      }
    }
  }
  be.prefetch_during_next(hints_);
}

void LlamaModel::hint_vectors(Backend& be, std::initializer_list<const std::vector<float>*> vs) {
  hints_.clear();
  for (const std::vector<float>* v : vs) {
    if (!v->empty()) hints_.push_back({v->data(), v->size() * sizeof(float)});
  }
  be.prefetch_during_next(hints_);
}

void LlamaModel::ensure_workspace(size_t n) {
  if (n <= capacity_) return;
  const size_t dim = static_cast<size_t>(cfg_.dim), kv = static_cast<size_t>(cfg_.kv_dim());
  const size_t qd = static_cast<size_t>(cfg_.q_dim()), ffn = static_cast<size_t>(cfg_.ffn_dim);
  x_.resize(n * dim);
  xn_.resize(n * dim);
  q_.resize(n * qd);
  k_.resize(n * kv);
  v_.resize(n * kv);
  att_.resize(n * std::max(qd, dim));  // attention output, then the rows that want logits
  proj_.resize(n * dim);
  gate_.resize(n * ffn);
  up_.resize(n * ffn);
  hidden_.resize(n * ffn);
  if (cfg_.n_experts > 0) {
    const size_t ne = static_cast<size_t>(cfg_.n_experts),
                 used = static_cast<size_t>(cfg_.n_experts_used),
                 eff = static_cast<size_t>(cfg_.expert_ffn_dim);
    router_logits_.resize(n * ne);
    slot_weight_.resize(n * used);
    slot_expert_.resize(n * used);
    slot_pos_.resize(n * used);
    moe_x_.resize(n * used * dim);
    moe_y_.resize(n * used * dim);
    const size_t widest =
        std::max({ffn, used * eff, static_cast<size_t>(cfg_.shared_expert_ffn_dim)});
    gate_.resize(n * widest);
    up_.resize(n * widest);
    hidden_.resize(n * widest);
    shared_gate_.resize(n);
    products_.reserve(2 * ne);
    down_products_.reserve(ne);
    expert_slots_.resize(ne);
  }
  n_ctx_.resize(n);
  slots_.resize(n);
  for (auto& cs : rope_cs_) cs.resize(n * static_cast<size_t>(cfg_.rope_dim));
  capacity_ = n;
}

void LlamaModel::forward(Backend& be, const ForwardBatch& batch, KvCache& kv, float* logits) {
  if (!shard_.whole() && !be.tensor_parallel()) {
    throw Error(
        "this model was loaded for one tensor-parallel rank and runs only through a "
        "tensor-parallel backend");
  }
  const size_t n = batch.tokens.size();
  if (n == 0) return;
  if (batch.positions.size() != n || batch.block_tables.size() != n || batch.n_prompt > n) {
    throw Error("forward: batch arrays disagree in length");
  }
  const Rows rows{n, batch.n_prompt};
  for (size_t i = 0; i < n; ++i) {
    if (batch.tokens[i] < 0 || batch.tokens[i] >= cfg_.n_vocab) {
      throw Error("token id " + std::to_string(batch.tokens[i]) + " is outside the vocabulary (" +
                  std::to_string(cfg_.n_vocab) + " tokens)");
    }
    if (batch.positions[i] < 0 || batch.positions[i] >= cfg_.context_length) {
      throw Error("position " + std::to_string(batch.positions[i]) +
                  " is outside the model's context of " + std::to_string(cfg_.context_length));
    }
  }
  size_t m_prompt = 0;  // logit rows of prompt tokens, which must come first
  for (size_t j = 0; j < batch.logit_rows.size(); ++j) {
    const size_t r = static_cast<size_t>(batch.logit_rows[j]);
    if (r >= n) throw Error("forward: logit row out of range");
    if (r < batch.n_prompt && m_prompt++ != j) {
      throw Error("forward: logit rows of prompt tokens must come first");
    }
  }
  ensure_workspace(n);
  const ArchSpec& spec = cfg_.spec;
  const size_t dim = static_cast<size_t>(cfg_.dim), kvd = static_cast<size_t>(cfg_.kv_dim());
  const size_t ffn = static_cast<size_t>(cfg_.ffn_dim), hd = static_cast<size_t>(cfg_.head_dim);
  const size_t n_heads = static_cast<size_t>(cfg_.n_heads);
  const size_t n_kv_heads = static_cast<size_t>(cfg_.n_kv_heads);
  const size_t bs = kv.block_size();
  for (size_t i = 0; i < n; ++i) {
    const size_t p = static_cast<size_t>(batch.positions[i]);
    n_ctx_[i] = batch.positions[i] + 1;
    slots_[i] = static_cast<size_t>(batch.block_tables[i][p / bs]) * bs + p % bs;
  }
  // Rotation angles depend only on the position: once per token, not per layer.
  const size_t rope_dim = static_cast<size_t>(cfg_.rope_dim);
  const bool any_local = spec.local_rope_base > 0.0f && !cfg_.layer_window.empty();
  for (size_t i = 0; i < n; ++i) {
    for (size_t t = 0; t < (any_local ? 2u : 1u); ++t) {
      kernels::rope_table(batch.positions[i], rope_dim, inv_freq_[t].data(),
                          &rope_cs_[t][i * rope_dim], t == 0 ? rope_mscale_ : 1.0f);
    }
  }

  be.get_rows(token_embd_, batch.tokens.data(), n, x_.data());
  if (spec.embed_scale) {
    const float s = std::sqrt(static_cast<float>(dim));
    for (size_t i = 0; i < n * dim; ++i) x_[i] *= s;
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerWeights& w = layers_[l];
    const int layer = static_cast<int>(l);
    be.rmsnorm(x_.data(), w.attn_norm.data(), n, dim, cfg_.rms_eps, xn_.data());
    hint_kv_reads(be, batch, kv, layer, {&w.bq, &w.bk, &w.bv, &w.q_norm, &w.k_norm});
    {
      const Matrix* ws[] = {&w.wq, &w.wk, &w.wv};
      float* ys[] = {q_.data(), k_.data(), v_.data()};
      be.matmul_many(ws, ys, 3, xn_.data(), rows);
    }
    if (spec.qkv_bias) {
      be.add_bias(q_.data(), n, n_heads * hd, w.bq.data());
      be.add_bias(k_.data(), n, kvd, w.bk.data());
      be.add_bias(v_.data(), n, kvd, w.bv.data());
    }
    if (spec.qk_norm) {  // each head is a row of head_dim
      be.rmsnorm(q_.data(), w.q_norm.data(), n * n_heads, hd, cfg_.rms_eps, q_.data());
      be.rmsnorm(k_.data(), w.k_norm.data(), n * n_kv_heads, hd, cfg_.rms_eps, k_.data());
    }
    const float* cs = rope_cs_[cfg_.local_rope(layer) ? 1 : 0].data();
    be.rope(q_.data(), n, n_heads, hd, rope_dim, cs, spec.rope);
    be.rope(k_.data(), n, n_kv_heads, hd, rope_dim, cs, spec.rope);
    // The batch's K/V go into the cache before any token attends (each to its own sequence up
    // to its own position, which makes attention causal within a prompt chunk): stored by the
    // attention itself, which can split the stores over the cores, unless a tensor-parallel
    // rank's cache holds only some heads.
    const bool attention_stores = !be.tensor_parallel() && kv.kv_dim() == kvd;
    if (!attention_stores) {
      for (size_t i = 0; i < n; ++i) {
        kv.write(l, slots_[i], k_.data() + i * kvd, v_.data() + i * kvd);
      }
    }
    AttentionArgs a;
    a.q = q_.data();
    a.out = att_.data();
    a.n_tokens = n;
    a.n_heads = n_heads;
    a.n_kv_heads = n_kv_heads;
    a.head_dim = hd;
    a.scale = cfg_.attn_scale;
    a.softcap = cfg_.attn_softcap;
    a.window = cfg_.window(layer);
    a.kv = kv.layer_view(l);
    a.block_tables = batch.block_tables.data();
    a.n_ctx = n_ctx_.data();
    if (attention_stores) {
      a.k_new = k_.data();
      a.v_new = v_.data();
      a.slots = slots_.data();
    }
    be.attention(a);
    hint_vectors(be, {&w.post_attn_norm, &w.ffn_norm});
    be.matmul(w.wo, att_.data(), rows, proj_.data());
    if (spec.post_norms) {
      be.rmsnorm(proj_.data(), w.post_attn_norm.data(), n, dim, cfg_.rms_eps, proj_.data());
    }
    for (size_t i = 0; i < n * dim; ++i) x_[i] += proj_[i];

    be.rmsnorm(x_.data(), w.ffn_norm.data(), n, dim, cfg_.rms_eps, xn_.data());
    if (cfg_.n_experts > 0) {
      moe_ffn(be, w, rows);
    } else {
      const Matrix* ws[] = {&w.w_gate, &w.w_up};
      float* ys[] = {gate_.data(), up_.data()};
      be.matmul_many(ws, ys, 2, xn_.data(), rows);
      if (spec.act == Activation::gelu_tanh) {
        be.geglu(gate_.data(), up_.data(), n * ffn, hidden_.data());
      } else {
        be.swiglu(gate_.data(), up_.data(), n * ffn, hidden_.data());
      }
      if (l + 1 < layers_.size()) {
        const LayerWeights& next = layers_[l + 1];
        hint_vectors(be, {&w.post_ffn_norm, &next.attn_norm, &next.bq, &next.bk, &next.bv,
                          &next.q_norm, &next.k_norm});
      } else {
        hint_vectors(be, {&w.post_ffn_norm, &output_norm_});
      }
      be.matmul(w.w_down, hidden_.data(), rows, proj_.data());
    }
    if (spec.post_norms) {
      be.rmsnorm(proj_.data(), w.post_ffn_norm.data(), n, dim, cfg_.rms_eps, proj_.data());
    }
    for (size_t i = 0; i < n * dim; ++i) x_[i] += proj_[i];
  }

  // Only the rows that need logits go through the (large) output projection.
  const size_t m = batch.logit_rows.size();
  if (m == 0) return;
  for (size_t j = 0; j < m; ++j) {
    const size_t r = static_cast<size_t>(batch.logit_rows[j]);
    std::memcpy(att_.data() + j * dim, x_.data() + r * dim, dim * sizeof(float));
  }
  be.rmsnorm(att_.data(), output_norm_.data(), m, dim, cfg_.rms_eps, xn_.data());
  be.matmul(output_, xn_.data(), Rows{m, m_prompt}, logits);
  if (cfg_.final_softcap > 0.0f) {
    be.softcap(logits, m * static_cast<size_t>(cfg_.n_vocab), cfg_.final_softcap);
  }
}

}  // namespace lift
