// Internals shared by the per-Isa matmul implementations (not part of the public API).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/act_quant.h"

namespace lift::kernels::detail {

struct MatmulArgs {
  GgmlType wt;
  const uint8_t* w;
  size_t w_row_bytes;
  size_t n_in;
  ActFormat af;
  const uint8_t* act;
  size_t act_stride;
  size_t n_rows;
  float* y;
  size_t ldy;
  size_t o_begin;
  size_t o_end;
};

// Throws std::invalid_argument (prefixed with `who`) unless the arguments describe a supported,
// self-consistent product.
void validate_matmul(const MatmulArgs& a, const char* who);

// Each runs a validated product with its own fixed per-output operation order.
void matmul_scalar(const MatmulArgs& a);
void matmul_avx2(const MatmulArgs& a);
void matmul_avx512(const MatmulArgs& a);

// Activation rows are processed in blocks of this many so that a block of quantized rows stays
// in L2 while the weights stream past it; decode batches fit in one block and thus read every
// weight byte once per call.
inline constexpr size_t kRowBlock = 64;

}  // namespace lift::kernels::detail
