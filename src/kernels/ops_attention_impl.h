// The fast attention kernel, included by one translation unit per instruction set, each
// defining LIFT_ATTENTION_NS. The code is written lane-wise (16 independent partial sums,
// fixed combining tree, no FMA contraction) so every instruction set rounds the same way.
// (No include guard: meant to be included once per namespace.)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/fp16.h"
#include "kernels/ops.h"

namespace lift::kernels::LIFT_ATTENTION_NS {

namespace {

// Dot product with 16 independent partial sums combined in a fixed tree: the compiler maps
// the lanes onto vector registers without reassociating, so every ISA rounds identically.
#if defined(__AVX512F__)
// The same lanes and the same combining tree as the portable version below, spelled out:
// lane j sums a[i] * b[i] for i = j mod 16 (a masked add for the tail), then lanes j and
// j + w are added for w = 8, 4, 2, 1.
inline float dot16(const float* a, const float* b, size_t n) {
  __m512 acc = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc = _mm512_mask_add_ps(
        acc, m, acc,
        _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(acc, 0), _mm512_extractf32x8_ps(acc, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

// o[d] += p[j] * v_j[d] for j = 0..len-1 in order (v_j at v + j * stride): per element the
// same multiply-then-add sequence as the portable loop, with o kept in registers across j.
inline void accumulate_rows(const float* p, const float* v, size_t stride, size_t len, float* o,
                            size_t n) {
  size_t d = 0;
  for (; d + 16 <= n; d += 16) {
    __m512 acc = _mm512_loadu_ps(o + d);
    for (size_t j = 0; j < len; ++j) {
      acc = _mm512_add_ps(acc,
                          _mm512_mul_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v + j * stride + d)));
    }
    _mm512_storeu_ps(o + d, acc);
  }
  for (; d < n; ++d) {
    float a = o[d];
    for (size_t j = 0; j < len; ++j) a += p[j] * v[j * stride + d];
    o[d] = a;
  }
}

#else
inline float dot16(const float* a, const float* b, size_t n) {
  float acc[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  for (int w = 8; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0];
}

inline void accumulate_rows(const float* p, const float* v, size_t stride, size_t len, float* o,
                            size_t n) {
  for (size_t d = 0; d < n; ++d) {
    float a = o[d];
    for (size_t j = 0; j < len; ++j) a += p[j] * v[j * stride + d];
    o[d] = a;
  }
}
#endif

// Reads `n` K or V values of one head at `slot` as floats (a view for F32, a conversion for
// F16: the hardware conversion is exact, as the scalar one).
inline const float* load_row(const KvLayerView& kv, const void* base, size_t slot, size_t kv_offset,
                             size_t n, float* buf) {
  const size_t at = slot * kv.kv_dim + kv_offset;
  if (kv.type == GgmlType::F32) return static_cast<const float*>(base) + at;
  const uint16_t* h = static_cast<const uint16_t*>(base) + at;
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(buf + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(buf + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
#endif
  for (; i < n; ++i) buf[i] = f16_to_f32(h[i]);
  return buf;
}

}  // namespace

// Up to kAttentionTile queries of one head of one sequence (consecutive positions of a prompt
// chunk) share every K and V row they read. Each query's own operation sequence is exactly
// the single-query one: same blocks, same order of scores, maxima, rescaling and sums. So a
// query's result does not depend on which other queries share its tile.
void attend_tile(const float* const* q, size_t n_q, const KvLayerView& kv, size_t kv_offset,
                 size_t head_dim, const int32_t* block_table, const int32_t* n_ctx, float scale,
                 float* scratch, float* const* out) {
  const size_t bs = kv.block_size;
  float* row = scratch;                       // head_dim: a converted K or V row
  float* m = row + head_dim;                  // n_q running maxima
  float* l = m + kAttentionTile;              // n_q running sums
  float* score = l + kAttentionTile;          // n_q x bs scores of the current block
  float* vbuf = score + kAttentionTile * bs;  // bs x head_dim: the block's V rows, if F16
  float* pbuf = vbuf + bs * head_dim;         // bs weights of one query
  size_t max_ctx = 0;
  for (size_t i = 0; i < n_q; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
    std::fill(out[i], out[i] + head_dim, 0.0f);
    max_ctx = std::max(max_ctx, static_cast<size_t>(n_ctx[i]));
  }
  for (size_t start = 0, b = 0; start < max_ctx; start += bs, ++b) {
    const size_t slot0 = static_cast<size_t>(block_table[b]) * bs;
    const size_t block_len = std::min(bs, max_ctx - start);
    for (size_t j = 0; j < block_len; ++j) {
      const float* k = load_row(kv, kv.k, slot0 + j, kv_offset, head_dim, row);
      for (size_t i = 0; i < n_q; ++i) {
        if (start + j < static_cast<size_t>(n_ctx[i]))
          score[i * bs + j] = dot16(q[i], k, head_dim) * scale;
      }
    }
    float m_new[kAttentionTile] = {};
    for (size_t i = 0; i < n_q; ++i) {
      const size_t n = static_cast<size_t>(n_ctx[i]);
      if (start >= n) continue;
      const size_t len = std::min(bs, n - start);
      float block_max = -INFINITY;
      for (size_t j = 0; j < len; ++j) block_max = std::max(block_max, score[i * bs + j]);
      m_new[i] = std::max(m[i], block_max);
      const float correction = std::exp(m[i] - m_new[i]);  // exp(-inf) = 0 on the first block
      l[i] *= correction;
      for (size_t d = 0; d < head_dim; ++d) out[i][d] *= correction;
    }
    // The block's V rows once (converted if F16), then each query's weighted sum over them,
    // position by position as in the single-query order.
    const float* v0;
    size_t v_stride;
    if (kv.type == GgmlType::F32) {
      v0 = static_cast<const float*>(kv.v) + slot0 * kv.kv_dim + kv_offset;
      v_stride = kv.kv_dim;
    } else {
      for (size_t j = 0; j < block_len; ++j) {
        load_row(kv, kv.v, slot0 + j, kv_offset, head_dim, vbuf + j * head_dim);
      }
      v0 = vbuf;
      v_stride = head_dim;
    }
    for (size_t i = 0; i < n_q; ++i) {
      const size_t n = static_cast<size_t>(n_ctx[i]);
      if (start >= n) continue;
      const size_t len = std::min(bs, n - start);
      for (size_t j = 0; j < len; ++j) {
        pbuf[j] = std::exp(score[i * bs + j] - m_new[i]);
        l[i] += pbuf[j];
      }
      accumulate_rows(pbuf, v0, v_stride, len, out[i], head_dim);
    }
    for (size_t i = 0; i < n_q; ++i) {
      if (start < static_cast<size_t>(n_ctx[i])) m[i] = m_new[i];
    }
  }
  for (size_t i = 0; i < n_q; ++i) {
    const float inv = 1.0f / l[i];
    for (size_t d = 0; d < head_dim; ++d) out[i][d] *= inv;
  }
}

}  // namespace lift::kernels::LIFT_ATTENTION_NS
