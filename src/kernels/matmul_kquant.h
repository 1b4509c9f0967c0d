// Stored-row kernels for the K-quants and IQ4_NL outside the generic matmul_<isa> files
// (matmul_kquant_avx2.cpp): one vector lane per output, so each output repeats the scalar
// kernel's float steps exactly.
#pragma once

#include "kernels/matmul_impl.h"

namespace lift::kernels::detail {

// Q2_K .. Q6_K and IQ4_XS rows on AVX2, bitwise equal to matmul_scalar: with q8_k activations
// (codec k_dot) and with f32 ones.
void matmul_kquant_avx2(const MatmulArgs& a);

// IQ4_NL rows on AVX2, the same way: q8_0 activations bitwise equal to the scalar kernel (codec
// q8_dot), f32 activations through matmul_scalar.
void matmul_iq4nl_avx2(const MatmulArgs& a);

}  // namespace lift::kernels::detail
