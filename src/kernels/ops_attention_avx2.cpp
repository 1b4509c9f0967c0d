// attend_head compiled for AVX2 (see ops_attention_impl.h).
#define LIFT_ATTENTION_NS attention_avx2
#include "kernels/ops_attention_impl.h"
