// dropout_rows.h's kernels compiled with AVX-512 (CMake gives this one file the flags on x86-64
// and defines NORMLAB_DROPOUT_AVX512 for model/dropout.cpp, which checks the CPU before calling).
#pragma once

#include <cstdint>

#include <c10/core/ScalarType.h>

namespace normlab::model::kernels {

struct MaskBits;  // dropout_rows.h

void mask_range_avx512(const MaskBits& bits, c10::ScalarType x_type, const void* x, c10::ScalarType out_type,
                       void* out, double p, int64_t pair_begin, int64_t pair_end);
void add_mask_range_avx512(const MaskBits& bits, c10::ScalarType r_type, const void* r, c10::ScalarType y_type,
                           const void* y, void* out, double p, int64_t pair_begin, int64_t pair_end);

}  // namespace normlab::model::kernels
