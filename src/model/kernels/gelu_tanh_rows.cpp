// gelu_tanh_rows_impl.h compiled with AVX2 and FMA (the flags come from CMake).
#define NORMLAB_ROWS_ISA avx2
#include "model/kernels/gelu_tanh_rows_impl.h"
