#include "train/optimizers/fused_step.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <torch/torch.h>

#include "model/kernels/cpu_features.h"
#include "train/optimizers/fused_rows.h"

#if AT_MKL_ENABLED() && !defined(__APPLE__)
// MKL's vector square root, which the wheel's libtorch_cpu exports and ATen's vml.h calls for
// torch.sqrt (LP64 MKL: MKL_INT is int; the mode is MKL_INT64). mkl.h is not in the wheel.
extern "C" {
void vmsSqrt(int n, const float* a, float* r, long long mode);
void vmdSqrt(int n, const double* a, double* r, long long mode);
}
#endif

namespace normlab::train::fused {
namespace {

// Elements per task: every element is computed alike, so the split changes no bit.
constexpr int64_t kGrain = 32768;

template <class T>
T* elements(const torch::Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// f(T()) at the tensor's element type, float or double.
template <class F>
void dispatch_float(const torch::Tensor& t, F&& f) {
  if (t.scalar_type() == torch::kFloat64) f(double());
  else f(float());
}

template <class Span>
void for_tasks(const torch::Tensor& t, Span&& span) {
  at::parallel_for(0, t.numel(), kGrain, [&](int64_t begin, int64_t end) { span(begin, end); });
}

}  // namespace

#if AT_MKL_ENABLED() && !defined(__APPLE__)
// vml.h's mode: VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE (mkl_vml_defines.h).
constexpr long long kVmlMode = 0x2 | 0x140000 | 0x100;
void aten_sqrt(float* x, int64_t n) { vmsSqrt(static_cast<int>(n), x, x, kVmlMode); }
void aten_sqrt(double* x, int64_t n) { vmdSqrt(static_cast<int>(n), x, x, kVmlMode); }
#else
template <class T>
void vector_sqrt(T* x, int64_t n) {
  at::vec::map([](at::vec::Vectorized<T> v) { return v.sqrt(); }, x, x, n);
}
void aten_sqrt(float* x, int64_t n) { vector_sqrt(x, n); }
void aten_sqrt(double* x, int64_t n) { vector_sqrt(x, n); }
#endif

bool applies(const std::vector<torch::Tensor>& tensors) {
  if (!model::kernels::avx2_fma() || tensors.empty()) return false;
  const auto type = tensors.front().scalar_type();
  if (type != torch::kFloat32 && type != torch::kFloat64) return false;
  for (const auto& t : tensors)
    if (!t.defined() || !t.device().is_cpu() || t.scalar_type() != type || !t.is_contiguous()) return false;
  return true;
}

void lion(const torch::Tensor& p, const torch::Tensor& grad, const torch::Tensor& exp_avg, const LionStep& s) {
  TORCH_CHECK(applies({p, grad, exp_avg}) && grad.numel() == p.numel() && exp_avg.numel() == p.numel(),
              "fused::lion: contiguous float32/float64 CPU tensors of one size and dtype only");
  dispatch_float(p, [&](auto tag) {
    using T = decltype(tag);
    LionConstants<T> k;
    k.decays = s.weight_decay != 0.0;
    k.decay = static_cast<T>(1.0 - s.lr * s.weight_decay);
    k.beta1 = static_cast<T>(s.beta1);
    k.one_minus_beta1 = static_cast<T>(1.0 - s.beta1);
    k.minus_lr = static_cast<T>(-s.lr);
    k.beta2 = static_cast<T>(s.beta2);
    k.one_minus_beta2 = static_cast<T>(1.0 - s.beta2);
    const auto span = model::kernels::aten_avx512() ? avx512::lion_span<T> : avx2::lion_span<T>;
    for_tasks(p, [&](int64_t begin, int64_t end) {
      span(elements<T>(p), elements<T>(grad), elements<T>(exp_avg), begin, end, k);
    });
  });
}

void schedule_free(const torch::Tensor& y, const torch::Tensor& grad, const torch::Tensor& z,
                   const torch::Tensor& exp_avg_sq, const ScheduleFreeStep& s) {
  TORCH_CHECK(applies({y, grad, z, exp_avg_sq}) && grad.numel() == y.numel() && z.numel() == y.numel() &&
                  exp_avg_sq.numel() == y.numel(),
              "fused::schedule_free: contiguous float32/float64 CPU tensors of one size and dtype only");
  dispatch_float(y, [&](auto tag) {
    using T = decltype(tag);
    ScheduleFreeConstants<T> k;
    k.decays = s.weight_decay != 0.0;
    k.beta2 = static_cast<T>(s.beta2);
    k.one_minus_beta2 = static_cast<T>(1.0 - s.beta2);
    k.bias_correction2 = static_cast<T>(s.bias_correction2);
    k.eps = static_cast<T>(s.eps);
    k.weight_decay = static_cast<T>(s.weight_decay);
    k.c = static_cast<T>(s.c);
    k.y_step = static_cast<T>(s.lr * (s.beta1 * (1.0 - s.c) - 1.0));  // x's and z's steps moved onto y
    k.minus_lr = static_cast<T>(-s.lr);
    const auto span = model::kernels::aten_avx512() ? avx512::schedule_free_span<T> : avx2::schedule_free_span<T>;
    for_tasks(y, [&](int64_t begin, int64_t end) {
      span(elements<T>(y), elements<T>(grad), elements<T>(z), elements<T>(exp_avg_sq), begin, end, k);
    });
  });
}

}  // namespace normlab::train::fused
