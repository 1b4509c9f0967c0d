// Row-wise operations shared by the CPU and reference backends. Each works on whole rows and
// reduces in a fixed order, so a token's result never depends on its batch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/target.h"

namespace lift::kernels {

void rmsnorm_row(const float* x, const float* weight, size_t dim, float eps, float* y);
// cs[2i], cs[2i + 1] = mscale * cos, sin of pos * inv_freq[i] for the rope_dim / 2 rotated
// pairs (computed in double, rounded once): one table per token serves every layer and head.
void rope_table(int32_t pos, size_t rope_dim, const float* inv_freq, float* cs,
                float mscale = 1.0f);
// Rotates the pairs of the first rope_dim dims of each head by the token's table: pair i is
// dims (2i, 2i + 1) for RopeStyle::adjacent, (i, i + rope_dim / 2) for RopeStyle::neox.
void rope_row(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, const float* cs,
              RopeStyle style = RopeStyle::adjacent);
void swiglu(const float* gate, const float* up, size_t n, float* out);
// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU with the tanh approximation of GELU), through
// the attention's exp: the same bits on every ISA.
void geglu(const float* gate, const float* up, size_t n, float* out);
// x[i] = cap * tanh(x[i] / cap) in float (one compiled copy, which every ISA's attention calls).
void softcap_scores(float* x, size_t n, float cap);

// What a layer's attention adds to plain scaled dot products: soft-capping of the scaled
// scores (0: none) and a sliding window (a query at position p sees positions q with
// p - q < window; 0: the whole context).
struct AttendMods {
  float softcap = 0.0f;
  int32_t window = 0;
};

// Queries attended together by attend_tile, and the scratch floats it needs.
inline constexpr size_t kAttentionTile = 16;
inline namespace LIFT_TARGET_NS {
// A query's scores and weights of one block take whole 16-lane vectors.
inline size_t attention_score_row(size_t block_size) { return (block_size + 15) / 16 * 16; }
// Score chains attend_tile runs at once; a lone query batches this many blocks.
inline constexpr size_t kAttentionScoreBatch = 8;
inline size_t attention_scratch_floats(size_t block_size, size_t head_dim) {
  // Queries, outputs, maxima, sums, scores, one block's V rows, weights, and the K of up to
  // kAttentionScoreBatch blocks converted from F16 (unused for an F32 cache).
  const size_t t = kAttentionTile, row = attention_score_row(block_size);
  const size_t wide = 16 + 2 * t * head_dim + 2 * t + 2 * t * row +
                      (1 + kAttentionScoreBatch) * block_size * head_dim;
  // Narrow heads (a transposed V): 16 lane-wise sums per dimension, maxima and sums per query,
  // the scores of kAttentionScoreBatch blocks, and their K and V converted from F16.
  const size_t narrow = 16 + kNarrowHeadDim * 16 * t + 2 * t + kAttentionScoreBatch * t * row +
                        2 * kAttentionScoreBatch * block_size * head_dim;
  return head_dim <= kNarrowHeadDim && narrow > wide ? narrow : wide;
}
}  // namespace LIFT_TARGET_NS

// Attention of n_q <= kAttentionTile queries of one head, all of one sequence (query i sees
// n_ctx[i] cached positions), streaming K/V block by block with an online softmax and never
// materializing the history. K/V are read in the cache's type (kv.type); kv_offset selects
// the head's columns. A query's result is bitwise the same in any tile, alone included.
// Blocks wholly before every query's window are not read.
void attend_tile(const float* const* q, size_t n_q, const KvLayerView& kv, size_t kv_offset,
                 size_t head_dim, const int32_t* block_table, const int32_t* n_ctx, float scale,
                 float* scratch, float* const* out, AttendMods mods = {});
// The exp attend_tile uses for its softmax weights, here for tests: within 1 ulp of exp on
// [-87.33, 88.72], 0 below (exp(-inf) = 0), +inf above, and the same bits for every Isa.
void softmax_exp(const float* x, size_t n, float* y);
// One query: a tile of one.
void attend_head(const float* q, const KvLayerView& kv, size_t kv_offset, size_t head_dim,
                 const int32_t* block_table, int32_t n_ctx, float scale, float* scratch, float* out,
                 AttendMods mods = {});
// Stores elements [e0, e1) of one token's K and V rows (k[e], v[e]), converted to the cache's
// type, where `kv` keeps them for cache slot `slot`. The view's memory is a KvCache's, which is
// written only this way (KvCache::write, the attention of a batch that brings its own K/V).
void kv_store(const KvLayerView& kv, size_t slot, size_t e0, size_t e1, const float* k,
              const float* v);
// The oracle: full softmax, double precision (soft-capping too), same K/V values.
void attend_head_reference(const float* q, const KvLayerView& kv, size_t kv_offset, size_t head_dim,
                           const int32_t* block_table, int32_t n_ctx, float scale, float* out,
                           AttendMods mods = {});

}  // namespace lift::kernels
