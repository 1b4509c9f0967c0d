// Quantization of activation rows to the formats llama.cpp's CPU backend feeds its integer dot
// products with, so lift can reproduce its default-setting numbers. Results are bit-identical for
// every Isa (the SIMD versions only change speed), which keeps matmuls reproducible.
#pragma once

#include <cstddef>

#include "gguf/ggml_type.h"

namespace lift::kernels {

// bf16x2: each value as two bf16 (kernels/bf16x2.h), all hi parts of the row, then all lo parts.
// q8_k: llama.cpp's Q8_K blocks of 256 (BlockQ8_K), the partner of the K-quant weights.
enum class ActFormat { f32, q8_0, q8_1, bf16x2, q8_k };

// What a product's activation rows are: prompt tokens, computed once in bulk, or generated
// tokens (decode steps, and their recomputation after preemption). Machines with AMX give the
// two kinds different kernels for float weights; a token's kind never depends on its batch.
enum class RowKind { generated, prompt };

// The activation format a matmul with this weight type takes: q8_0 for Q8_0/Q4_0/Q5_0/IQ4_NL,
// q8_1 for Q4_1/Q5_1, q8_k for the K-quants (codec.h), f32 for float weights or when
// quantize_activations is false, except bf16x2 for prompt rows of F16/BF16 weights when the active
// Isa is amx (the tile multiplier's operands). Throws std::invalid_argument for weight types the
// kernels do not support.
ActFormat act_format(GgmlType weight, bool quantize_activations, RowKind kind = RowKind::generated);

// Whether prompt and generated rows of this weight type take different activation formats (and
// so different kernels) under the active Isa. False for types act_format does not know.
bool kinds_differ(GgmlType weight, bool quantize_activations);

// Bytes of one activation row of n elements (n a multiple of 32 for q8_0/q8_1, of 256 for q8_k,
// else throws; 4n for bf16x2).
size_t act_row_bytes(ActFormat af, size_t n);

// Writes act_row_bytes(af, n) bytes to dst. Per 32 values: amax = max|x|, d = amax/127 (stored
// f16), id = 127/amax in f32 (0 when amax == 0), q = round-half-even(x*id) saturated to int8;
// q8_1 also stores s = f16(d * sum(q)) with d the f32 value. q8_k, per 256 values (as ggml's
// quantize_row_q8_K): xm = the first value of largest |x|, iscale = -127/xm, q = min(127,
// round-half-even(iscale * x)), d = 1/iscale stored as f32, bsums = sums of each 16 codes (all
// zero when xm == 0). x must be finite.
void quantize_activation_row(ActFormat af, const float* x, size_t n, void* dst);

}  // namespace lift::kernels
