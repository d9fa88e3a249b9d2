// dropout_rows.h compiled with AVX-512 (the flags come from CMake; nothing else in this file).
#include "model/kernels/dropout_rows_avx512.h"

#include "model/kernels/dropout_rows.h"

namespace normlab::model::kernels {

void mask_range_avx512(const MaskBits& bits, c10::ScalarType x_type, const void* x, c10::ScalarType out_type,
                       void* out, double p, int64_t pair_begin, int64_t pair_end) {
  mask_range(bits, x_type, x, out_type, out, p, pair_begin, pair_end);
}

void add_mask_range_avx512(const MaskBits& bits, c10::ScalarType r_type, const void* r, c10::ScalarType y_type,
                           const void* y, void* out, double p, int64_t pair_begin, int64_t pair_end) {
  add_mask_range(bits, r_type, r, y_type, y, out, p, pair_begin, pair_end);
}

}  // namespace normlab::model::kernels
