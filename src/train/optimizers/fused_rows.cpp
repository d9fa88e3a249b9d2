// fused_rows_impl.h compiled with AVX2 and FMA (the flags come from CMake).
#define NORMLAB_ROWS_ISA avx2
#include "train/optimizers/fused_rows_impl.h"
