// gelu_tanh_rows_impl.h compiled with AVX-512 (the flags come from CMake).
#define NORMLAB_ROWS_ISA avx512
#include "model/kernels/gelu_tanh_rows_impl.h"
