// The row kernels of log_softmax_terms.cpp, compiled apart (CMake; log_softmax_terms_rows_impl.h):
// raw pointers and ATen's vector types only, so that nothing built for AVX2 or AVX-512 is shared
// with the rest of the program. Rows [begin, end) of logits (n,v); T is c10::BFloat16 or c10::Half.
#pragma once

#include <cstdint>

namespace normlab::model::kernels {

// The kernels once per instruction set, as beam_log_probs_rows.h: avx2 (AVX2 and FMA) and avx512
// (AVX-512 F/DQ/VL/BW, ATen's exp on 16 lanes), the latter run where ATen's own kernels run at
// AVX-512. lse, nll, smooth: float arrays of the rows;
// grad[i, j] = exp(l_ij - lse_i) (g_nll_i + V g_smooth_i) - g_smooth_i - [j == t_i] g_nll_i.
#define NORMLAB_LOG_SOFTMAX_TERMS_ROWS(isa)                                                               \
  namespace isa {                                                                                         \
  template <class T>                                                                                      \
  void log_softmax_terms_rows(const T* logits, const int64_t* target, int64_t v, int64_t begin,           \
                              int64_t end, float* lse, float* nll, float* smooth);                        \
  template <class T>                                                                                      \
  void log_softmax_terms_grad_rows(const T* logits, const int64_t* target, const float* lse,              \
                                   const float* g_nll, const float* g_smooth, int64_t v, int64_t begin,   \
                                   int64_t end, T* grad);                                                 \
  }
NORMLAB_LOG_SOFTMAX_TERMS_ROWS(avx2)
NORMLAB_LOG_SOFTMAX_TERMS_ROWS(avx512)
#undef NORMLAB_LOG_SOFTMAX_TERMS_ROWS

}  // namespace normlab::model::kernels
