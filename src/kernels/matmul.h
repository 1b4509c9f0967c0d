// y = W x for a batch of activation rows: the one matrix product every linear layer uses.
//
// Determinism contract: for a given Isa, y[r][o] is bitwise the same whatever n_rows is, whichever
// other rows share the call, wherever r sits among them and however [o_begin, o_end) is cut (the
// caller splits output columns among threads). Each (r, o) gets one fixed sequence of float
// operations over the inner dimension; tiling only changes which outputs are computed together.
// Different Isas may differ from each other, each staying within 1e-4 * max(1, max|y_row|) of
// matmul_reference.
#pragma once

#include <cstddef>

#include "gguf/ggml_type.h"
#include "kernels/act_quant.h"
#include "kernels/isa.h"

namespace lift::kernels {

// W: n_out rows of n_in elements of type wt, row o at (const uint8_t*)w + o * w_row_bytes.
// act: n_rows activation rows in format af (from quantize_activation_row, or raw floats when
// af == f32), row r at (const uint8_t*)act + r * act_stride.
// Computes y[r * ldy + o] = dot(W row o, act row r) for r in [0, n_rows), o in [o_begin, o_end).
// Supported (wt, af): every codec type (codec.h) with f32, and each quantized type with its
// codec's format (q8_0: Q8_0/Q4_0/Q5_0/IQ4_NL, q8_1: Q4_1/Q5_1, q8_k: Q2_K..Q6_K/IQ4_XS). Throws
// std::invalid_argument for other pairs or inconsistent sizes. Quantized n_in must be a whole
// number of blocks (32 or 256); f32 activations must be 4-byte aligned.
// Never allocates and never starts threads.
void matmul(GgmlType wt, const void* w, size_t w_row_bytes, size_t n_in, ActFormat af,
            const void* act, size_t act_stride, size_t n_rows, float* y, size_t ldy, size_t o_begin,
            size_t o_end);

// Plain scalar product with double accumulation over the same decoded operands: weights exactly
// as stored (decoded to float, or integer codes), activations as given. The yardstick for tests.
void matmul_reference(GgmlType wt, const void* w, size_t w_row_bytes, size_t n_in, ActFormat af,
                      const void* act, size_t act_stride, size_t n_rows, float* y, size_t ldy,
                      size_t o_begin, size_t o_end);

}  // namespace lift::kernels
