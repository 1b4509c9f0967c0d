// Placeholder until the avx512 kernels land: forwards to the scalar implementation.
#include "kernels/matmul_impl.h"

namespace lift::kernels::detail {

void matmul_avx512(const MatmulArgs& a) { matmul_scalar(a); }

}  // namespace lift::kernels::detail
