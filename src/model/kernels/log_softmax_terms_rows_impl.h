// The body of log_softmax_terms_rows.h's kernels, compiled twice (CMake): into
// log_softmax_terms_rows.cpp with AVX2/FMA and into log_softmax_terms_rows_avx512.cpp with
// AVX-512, each defining NORMLAB_ROWS_ISA (avx2, avx512) and including this file once.
#include "model/kernels/log_softmax_terms_rows.h"

#include <cmath>
#include <limits>

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace normlab::model::kernels::NORMLAB_ROWS_ISA {
namespace {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t kLanes = Vec::size();

}  // namespace

template <class T>
void log_softmax_terms_rows(const T* logits, const int64_t* target, int64_t v, int64_t begin, int64_t end,
                            float* lse, float* nll, float* smooth) {
  const int64_t body = v - v % kLanes;
  for (int64_t i = begin; i < end; ++i) {
    const T* x = logits + i * v;
    // Pass 1: the row's maximum and sum.
    Vec vmax(-std::numeric_limits<float>::infinity()), vsum(0.0f);
    for (int64_t j = 0; j < body; j += kLanes) {
      Vec a;
      at::vec::load_to_float(x + j, a);
      vmax = at::vec::maximum(vmax, a);
      vsum = vsum + a;
    }
    float mx = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, vmax);
    float sum = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, vsum);
    for (int64_t j = body; j < v; ++j) {
      mx = std::max(mx, static_cast<float>(x[j]));
      sum += static_cast<float>(x[j]);
    }
    // Pass 2: sum exp(l - max) (the row is in cache now).
    const Vec shift(mx);
    Vec vexp(0.0f);
    for (int64_t j = 0; j < body; j += kLanes) {
      Vec a;
      at::vec::load_to_float(x + j, a);
      vexp = vexp + (a - shift).exp();
    }
    float s = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, vexp);
    for (int64_t j = body; j < v; ++j) s += std::exp(static_cast<float>(x[j]) - mx);
    lse[i] = mx + std::log(s);
    nll[i] = lse[i] - static_cast<float>(x[target[i]]);
    smooth[i] = static_cast<float>(v) * lse[i] - sum;
  }
}

template <class T>
void log_softmax_terms_grad_rows(const T* logits, const int64_t* target, const float* lse,
                                 const float* g_nll, const float* g_smooth, int64_t v, int64_t begin,
                                 int64_t end, T* grad) {
  const int64_t body = v - v % (2 * kLanes);
  for (int64_t i = begin; i < end; ++i) {
    const T* x = logits + i * v;
    T* g = grad + i * v;
    const float a = g_nll[i] + static_cast<float>(v) * g_smooth[i], b = g_smooth[i];
    const Vec va(a), vb(b), vlse(lse[i]);
    for (int64_t j = 0; j < body; j += 2 * kLanes) {
      Vec x0, x1;
      at::vec::load_to_float(x + j, x0, x1);
      const Vec r0 = (x0 - vlse).exp() * va - vb, r1 = (x1 - vlse).exp() * va - vb;
      at::vec::convert_from_float<T>(r0, r1).store(g + j);
    }
    auto one = [&](int64_t j) { return std::exp(static_cast<float>(x[j]) - lse[i]) * a - b; };
    for (int64_t j = body; j < v; ++j) g[j] = static_cast<T>(one(j));
    const int64_t t = target[i];
    g[t] = static_cast<T>(one(t) - g_nll[i]);
  }
}

#define NORMLAB_INSTANTIATE(T)                                                                        \
  template void log_softmax_terms_rows<T>(const T*, const int64_t*, int64_t, int64_t, int64_t, float*, \
                                          float*, float*);                                            \
  template void log_softmax_terms_grad_rows<T>(const T*, const int64_t*, const float*, const float*,  \
                                               const float*, int64_t, int64_t, int64_t, T*);
NORMLAB_INSTANTIATE(c10::BFloat16)
NORMLAB_INSTANTIATE(c10::Half)
#undef NORMLAB_INSTANTIATE

}  // namespace normlab::model::kernels::NORMLAB_ROWS_ISA
