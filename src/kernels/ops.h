// Row-wise operations shared by the CPU and reference backends. Each works on whole rows and
// reduces in a fixed order, so a token's result never depends on its batch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"

namespace lift::kernels {

void rmsnorm_row(const float* x, const float* weight, size_t dim, float eps, float* y);
void rope_row(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, int32_t pos,
              const float* inv_freq);
void swiglu(const float* gate, const float* up, size_t n, float* out);

// Attention of one query head over n_ctx cached positions, streaming K/V block by block with
// an online softmax (never materializing the whole history). K/V are read in the cache's type
// (kv.type); kv_offset selects the head's columns. scratch holds block_size + 2 * head_dim
// floats.
void attend_head(const float* q, const KvLayerView& kv, size_t kv_offset, size_t head_dim,
                 const int32_t* block_table, int32_t n_ctx, float scale, float* scratch,
                 float* out);
// The oracle: full softmax, double precision, same K/V values.
void attend_head_reference(const float* q, const KvLayerView& kv, size_t kv_offset, size_t head_dim,
                           const int32_t* block_table, int32_t n_ctx, float scale, float* out);

}  // namespace lift::kernels
