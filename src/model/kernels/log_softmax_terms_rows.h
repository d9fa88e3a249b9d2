// The row kernels of log_softmax_terms.cpp, compiled apart with AVX2/FMA (CMake): raw
// pointers and ATen's vector types only, so that nothing built for AVX2 is shared with the
// rest of the program. Rows [begin, end) of logits (n,v); T is c10::BFloat16 or c10::Half.
#pragma once

#include <cstdint>

namespace normlab::model::kernels {

// lse, nll, smooth: float arrays of the rows.
template <class T>
void log_softmax_terms_rows(const T* logits, const int64_t* target, int64_t v, int64_t begin, int64_t end,
                            float* lse, float* nll, float* smooth);
// grad[i, j] = exp(l_ij - lse_i) (g_nll_i + V g_smooth_i) - g_smooth_i - [j == t_i] g_nll_i
template <class T>
void log_softmax_terms_grad_rows(const T* logits, const int64_t* target, const float* lse,
                                 const float* g_nll, const float* g_smooth, int64_t v, int64_t begin,
                                 int64_t end, T* grad);

}  // namespace normlab::model::kernels
