// The element loops of fused_step.cpp, compiled apart (CMake; fused_rows_impl.h), as
// model/kernels/*_rows.h: raw pointers and ATen's vector types only. Elements [begin, end) of
// contiguous arrays of T (float or double). Every constant is already in T, as ATen rounds a
// Scalar to the tensor's type before its kernel runs.
#pragma once

#include <cstdint>

namespace normlab::train::fused {

// Lion's update (lion.cpp): p *= decay (when decays); c = b1 m + (1 - b1) g;
// p -= lr sign(c); m = b2 m + (1 - b2) g.
template <class T>
struct LionConstants {
  bool decays = false;
  T decay, beta1, one_minus_beta1, minus_lr, beta2, one_minus_beta2;
};

// Schedule-free AdamW's update (schedule_free.cpp): v = b2 v + (1 - b2) g^2;
// d = g / (sqrt(v / bias_correction2) + eps) (+ wd y when decays); y = lerp(y, z, c) + y_step d;
// z -= lr d.
template <class T>
struct ScheduleFreeConstants {
  bool decays = false;
  T beta2, one_minus_beta2, bias_correction2, eps, weight_decay, c, y_step, minus_lr;
};

// x = sqrt(x) for n elements, as torch.sqrt computes it on the CPU (at::vml::vsqrt: MKL's vector
// square root in a build with MKL, else the correctly rounded one), where sqrt_as_aten() says it
// is known. fused_step.cpp.
bool sqrt_as_aten();
void aten_sqrt(float* x, int64_t n);
void aten_sqrt(double* x, int64_t n);

#define NORMLAB_FUSED_ROWS(isa)                                                                     \
  namespace isa {                                                                                   \
  template <class T>                                                                                \
  void lion_span(T* p, const T* g, T* m, int64_t begin, int64_t end, const LionConstants<T>& k);   \
  template <class T>                                                                                \
  void schedule_free_span(T* y, const T* g, T* z, T* v, int64_t begin, int64_t end,                 \
                          const ScheduleFreeConstants<T>& k);                                       \
  }
NORMLAB_FUSED_ROWS(avx2)
NORMLAB_FUSED_ROWS(avx512)
#undef NORMLAB_FUSED_ROWS

}  // namespace normlab::train::fused
