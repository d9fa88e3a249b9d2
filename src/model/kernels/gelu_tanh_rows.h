// The element kernels of gelu_tanh.cpp, compiled apart (CMake; gelu_tanh_rows_impl.h), as
// log_softmax_terms_rows.h: raw pointers and ATen's vector types only. Elements [begin, end) of
// contiguous arrays; T is c10::BFloat16 or c10::Half.
#pragma once

#include <cstdint>

namespace normlab::model::kernels {

// y = gelu(x); dx = g gelu'(x) (the formulas of gelu_tanh.h), once per instruction set.
#define NORMLAB_GELU_TANH_ROWS(isa)                                                            \
  namespace isa {                                                                              \
  template <class T>                                                                           \
  void gelu_tanh_span(const T* x, int64_t begin, int64_t end, T* y);                           \
  template <class T>                                                                           \
  void gelu_tanh_grad_span(const T* x, const T* g, int64_t begin, int64_t end, T* dx);         \
  }
NORMLAB_GELU_TANH_ROWS(avx2)
NORMLAB_GELU_TANH_ROWS(avx512)
#undef NORMLAB_GELU_TANH_ROWS

}  // namespace normlab::model::kernels
