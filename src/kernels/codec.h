// The table of weight formats the kernels compute with: one codec per ggml type, holding what
// every path needs to know of it (block geometry, exact decoding, the activation format it
// pairs with, its scalar and reference dot products, and which SIMD kernels it has). Dequant,
// matmul dispatch, the reference matmul, act_format and the panel code all read this table, so
// a new format is one codec entry (codec_table.cpp) plus its per-ISA kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/act_quant.h"

namespace lift::kernels {

namespace detail {
struct MatmulArgs;
}

struct Codec {
  GgmlType type;
  size_t block_elems;  // 1 for the float types
  size_t block_bytes;
  // Activation format of the integer dot product (f32 for float weights).
  ActFormat act;
  // Decodes n_blocks consecutive blocks to floats, bit-exact with ggml's to_float.
  void (*decode)(const uint8_t* src, size_t n_blocks, float* dst);
  // Dot of nb weight blocks with one activation row in format `act` (quantized formats only):
  // float arithmetic in the scalar kernel's fixed order, and the same operands summed in
  // double for matmul_reference.
  float (*dot)(const uint8_t* w, const uint8_t* x, size_t nb);
  double (*dot_reference)(const uint8_t* w, const uint8_t* x, size_t nb);
  // Stored-row SIMD kernels (both activation formats), or null where only the scalar kernel
  // runs. Row panels (panel.h) are a separate, load-time layout.
  void (*rows_avx2)(const detail::MatmulArgs&);
  void (*rows_avx512)(const detail::MatmulArgs&);
};

// The codec of t, or nullptr when the kernels cannot compute with t.
const Codec* find_codec(GgmlType t);

// The codec of t; throws std::invalid_argument "<who>: unsupported weight type <name>" if none.
const Codec& codec_of(GgmlType t, const char* who);

}  // namespace lift::kernels
