// The row kernels of int8 decoding (model/int8_linear.cpp), compiled apart (CMake;
// int8_rows_impl.h), as log_softmax_terms_rows.h: raw pointers and ATen's vector types only.
#pragma once

#include <cstdint>

namespace normlab::model::kernels {

// The uint8 grid of a row divided by its max |x|: [-1, 1] in steps of `step` around `zero_point`
// (PyTorch's dynamic quantisation of that range: 2/255 and 128, or 2/127 and 64 with 7-bit
// activations), values clamped to [0, qmax].
struct RowGrid {
  float step;
  int32_t zero_point;
  int32_t qmax;
};

// The kernels once per instruction set: avx2 (AVX2 and FMA) and avx512 (AVX-512 F/DQ/VL/BW), the
// latter run where ATen's own kernels run at AVX-512.
//   quantise_rows: rows [begin, end) of x (.., k) float32 -> q (.., k) uint8 on `grid`, with
//     n_i = max |x_i| (the smallest normal float for a row of zeros): q = clamp(round(x / n_i *
//     (1 / step) + zero_point)), round half to even, as fbgemm quantises the rows divided by
//     n_i; and norm[i] = n_i.
//   dequantise_rows: rows [begin, end) of acc (.., n) int32 = q wqᵀ, overwritten in place with the
//     float32 fma((acc - col_offset[j]) * col_scale[j], norm[i], bias[j]) (bias may be null: the
//     product alone), rounded as fbgemm's requantisation to float then at::addcmul's fused
//     multiply-add round them (the composition of PyTorch operators it replaces, bit for bit:
//     tests/model/int8_linear_test.cpp), max(., 0) with relu.
#define NORMLAB_INT8_ROWS(isa)                                                                              \
  namespace isa {                                                                                           \
  void quantise_rows(const float* x, int64_t k, int64_t begin, int64_t end, RowGrid grid, uint8_t* q,       \
                     float* norm);                                                                          \
  void dequantise_rows(int32_t* acc, int64_t n, int64_t begin, int64_t end, const float* norm,              \
                       const float* col_scale, const int32_t* col_offset, const float* bias, bool relu);    \
  }
NORMLAB_INT8_ROWS(avx2)
NORMLAB_INT8_ROWS(avx512)
#undef NORMLAB_INT8_ROWS

}  // namespace normlab::model::kernels
