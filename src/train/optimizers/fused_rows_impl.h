// The body of fused_rows.h's loops, compiled twice (CMake): into fused_rows.cpp with AVX2/FMA and
// into fused_rows_avx512.cpp with AVX-512, each defining NORMLAB_ROWS_ISA.
//
// Each element goes through the operations of the _foreach calls it replaces, in their order and
// with their roundings, as ATen's CPU kernels compute them (PyTorch 2.x): a Scalar times a tensor
// is one product; add/sub with alpha is one fused multiply-add, fma(other, alpha, self) (ufunc
// add.h); addcmul is fma(value t1, t2, self) (the product value t1 rounded first); lerp is
// fma(w, end - start, start) for |w| < 0.5, else fma(w - 1, end - start, end) (Lerp.h); sign is
// (0 < x) - (x < 0); sqrt is MKL's vector square root where ATen is built with MKL (vml.h: not
// correctly rounded in float32, so the vector sqrt instruction would differ). So the fused step
// is bit for bit the unfused one (tests/train/fused_step_test.cpp), and keeps agreeing with
// lion-pytorch's and schedulefree's float32 to the bit where those did.
// The last partial vector is loaded and stored partially and computed as the others (an FMA is
// one rounding at every width, and ATen's scalar tail contracts to the same FMA).
#include "train/optimizers/fused_rows.h"

#include <algorithm>
#include <cmath>

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

namespace normlab::train::fused::NORMLAB_ROWS_ISA {
namespace {

template <class T>
using Vec = at::vec::Vectorized<T>;

// Calls f(i, n) for consecutive runs of at most one vector's lanes covering [begin, end).
template <class T, class F>
void for_vectors(int64_t begin, int64_t end, F&& f) {
  constexpr int64_t lanes = Vec<T>::size();
  for (int64_t i = begin; i < end; i += lanes) f(i, static_cast<int>(std::min<int64_t>(lanes, end - i)));
}

template <class T>
Vec<T> load(const T* x, int64_t i, int n) {
  return n == Vec<T>::size() ? Vec<T>::loadu(x + i) : Vec<T>::loadu(x + i, n);
}

template <class T>
void store(const Vec<T>& value, T* x, int64_t i, int n) {
  if (n == Vec<T>::size()) value.store(x + i);
  else value.store(x + i, n);
}

// torch.sign: 1, -1, or 0 for +-0 and NaN.
template <class T>
Vec<T> sign(const Vec<T>& x) {
  const Vec<T> zero(0), one(1);
  return Vec<T>::blendv(zero, one, zero < x) - Vec<T>::blendv(zero, one, x < zero);
}

// torch.lerp(start, end, w) for a scalar weight w.
template <class T>
Vec<T> lerp(const Vec<T>& start, const Vec<T>& end, T w) {
  const bool small = std::abs(w) < T(0.5);
  return at::vec::fmadd(Vec<T>(small ? w : w - T(1)), end - start, small ? start : end);
}

}  // namespace

template <class T>
void lion_span(T* p, const T* g, T* m, int64_t begin, int64_t end, const LionConstants<T>& k) {
  for_vectors<T>(begin, end, [&](int64_t i, int n) {
    Vec<T> pv = load(p, i, n), mv = load(m, i, n);
    const Vec<T> gv = load(g, i, n);
    if (k.decays) pv = pv * Vec<T>(k.decay);                                      // p *= 1 - lr wd
    const Vec<T> c = at::vec::fmadd(gv, Vec<T>(k.one_minus_beta1), mv * Vec<T>(k.beta1));
    pv = at::vec::fmadd(sign(c), Vec<T>(k.minus_lr), pv);                        // p -= lr sign(c)
    mv = at::vec::fmadd(gv, Vec<T>(k.one_minus_beta2), mv * Vec<T>(k.beta2));    // m = b2 m + (1 - b2) g
    store(pv, p, i, n);
    store(mv, m, i, n);
  });
}

// In blocks that stay in L2: v and v / bias_correction2 first, then ATen's square root of the
// block (aten_sqrt, as torch.sqrt computes it), then the rest. MKL's call costs ~1 us: 1024-element
// blocks took 57 ms a step over 41.8M parameters, 8192 41 ms, 16384-65536 no less (2 threads).
template <class T>
void schedule_free_span(T* y, const T* g, T* z, T* v, int64_t begin, int64_t end,
                        const ScheduleFreeConstants<T>& k) {
  constexpr int64_t block = 8192;
  T root[block];
  for (int64_t start = begin; start < end; start += block) {
    const int64_t stop = std::min(end, start + block);
    for_vectors<T>(start, stop, [&](int64_t i, int n) {
      const Vec<T> gv = load(g, i, n);
      const Vec<T> vv = at::vec::fmadd(Vec<T>(k.one_minus_beta2) * gv, gv, load(v, i, n) * Vec<T>(k.beta2));
      store(vv, v, i, n);                                                   // v = b2 v + (1 - b2) g^2
      store(vv / Vec<T>(k.bias_correction2), root, i - start, n);
    });
    aten_sqrt(root, stop - start);
    for_vectors<T>(start, stop, [&](int64_t i, int n) {
      Vec<T> yv = load(y, i, n), zv = load(z, i, n);
      Vec<T> d = load(g, i, n) / (load(root, i - start, n) + Vec<T>(k.eps));
      if (k.decays) d = at::vec::fmadd(yv, Vec<T>(k.weight_decay), d);      // decay at y
      yv = at::vec::fmadd(d, Vec<T>(k.y_step), lerp(yv, zv, k.c));
      zv = at::vec::fmadd(d, Vec<T>(k.minus_lr), zv);                       // z -= lr d
      store(yv, y, i, n);
      store(zv, z, i, n);
    });
  }
}

#define NORMLAB_INSTANTIATE(T)                                                                           \
  template void lion_span<T>(T*, const T*, T*, int64_t, int64_t, const LionConstants<T>&);               \
  template void schedule_free_span<T>(T*, const T*, T*, T*, int64_t, int64_t, const ScheduleFreeConstants<T>&);
NORMLAB_INSTANTIATE(float)
NORMLAB_INSTANTIATE(double)
#undef NORMLAB_INSTANTIATE

}  // namespace normlab::train::fused::NORMLAB_ROWS_ISA
