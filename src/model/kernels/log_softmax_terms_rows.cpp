// log_softmax_terms_rows_impl.h compiled with AVX2 and FMA (the flags come from CMake).
#define NORMLAB_ROWS_ISA avx2
#include "model/kernels/log_softmax_terms_rows_impl.h"
