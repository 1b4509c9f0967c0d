// attend_head compiled for AVX512 (see ops_attention_impl.h).
#define LIFT_ATTENTION_NS attention_avx512
#include "kernels/ops_attention_impl.h"
