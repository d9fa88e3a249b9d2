// log_softmax_terms_rows_impl.h compiled with AVX-512 (the flags come from CMake).
#define NORMLAB_ROWS_ISA avx512
#include "model/kernels/log_softmax_terms_rows_impl.h"
