// Placeholder until the avx2 kernels land: forwards to the scalar implementation.
#include "kernels/matmul_impl.h"

namespace lift::kernels::detail {

void matmul_avx2(const MatmulArgs& a) { matmul_scalar(a); }

}  // namespace lift::kernels::detail
