// The body of gelu_tanh_rows.h's kernels, compiled twice (CMake): into gelu_tanh_rows.cpp with
// AVX2/FMA and into gelu_tanh_rows_avx512.cpp with AVX-512, each defining NORMLAB_ROWS_ISA.
#include "model/kernels/gelu_tanh_rows.h"

#include <cmath>

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace normlab::model::kernels::NORMLAB_ROWS_ISA {
namespace {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t kLanes = Vec::size();
constexpr float kBeta = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kKappa = 0.044715f;

// s = sigmoid(2u) = 1 / (1 + exp(-2u)), u = kBeta (x + kKappa x^3).
Vec sigmoid_2u(const Vec& x) {
  const Vec minus_two_u = Vec(-2.0f * kBeta) * (x + Vec(kKappa) * x * x * x);
  return Vec(1.0f) / (Vec(1.0f) + minus_two_u.exp_u20());
}

float sigmoid_2u(float x) {
  return 1.0f / (1.0f + std::exp(-2.0f * kBeta * (x + kKappa * x * x * x)));
}

Vec gelu_grad(const Vec& x, const Vec& g) {
  const Vec s = sigmoid_2u(x);
  const Vec du = Vec(kBeta) * (Vec(1.0f) + Vec(3.0f * kKappa) * x * x);
  return g * (s + Vec(2.0f) * x * s * (Vec(1.0f) - s) * du);
}

float gelu_grad(float x, float g) {
  const float s = sigmoid_2u(x);
  return g * (s + 2.0f * x * s * (1.0f - s) * kBeta * (1.0f + 3.0f * kKappa * x * x));
}

}  // namespace

template <class T>
void gelu_tanh_span(const T* x, int64_t begin, int64_t end, T* y) {
  int64_t i = begin;
  for (; i + 2 * kLanes <= end; i += 2 * kLanes) {
    Vec a, b;
    at::vec::load_to_float(x + i, a, b);
    at::vec::convert_from_float<T>(a * sigmoid_2u(a), b * sigmoid_2u(b)).store(y + i);
  }
  for (; i < end; ++i) {
    const float a = static_cast<float>(x[i]);
    y[i] = static_cast<T>(a * sigmoid_2u(a));
  }
}

template <class T>
void gelu_tanh_grad_span(const T* x, const T* g, int64_t begin, int64_t end, T* dx) {
  int64_t i = begin;
  for (; i + 2 * kLanes <= end; i += 2 * kLanes) {
    Vec a, b, ga, gb;
    at::vec::load_to_float(x + i, a, b);
    at::vec::load_to_float(g + i, ga, gb);
    at::vec::convert_from_float<T>(gelu_grad(a, ga), gelu_grad(b, gb)).store(dx + i);
  }
  for (; i < end; ++i) dx[i] = static_cast<T>(gelu_grad(static_cast<float>(x[i]), static_cast<float>(g[i])));
}

#define NORMLAB_INSTANTIATE(T)                                            \
  template void gelu_tanh_span<T>(const T*, int64_t, int64_t, T*);        \
  template void gelu_tanh_grad_span<T>(const T*, const T*, int64_t, int64_t, T*);
NORMLAB_INSTANTIATE(c10::BFloat16)
NORMLAB_INSTANTIATE(c10::Half)
#undef NORMLAB_INSTANTIATE

}  // namespace normlab::model::kernels::NORMLAB_ROWS_ISA
