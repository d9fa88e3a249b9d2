// fused_rows_impl.h compiled with AVX-512 (the flags come from CMake).
#define NORMLAB_ROWS_ISA avx512
#include "train/optimizers/fused_rows_impl.h"
