#include "train/optimizers/fused_step.h"

#include <dlfcn.h>

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <torch/torch.h>

#include "model/kernels/cpu_features.h"
#include "train/optimizers/fused_rows.h"

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
namespace {

// MKL's vector square roots, which ATen's vml.h calls for torch.sqrt. mkl.h is not in the wheel:
// they are found in the loaded libtorch_cpu at run time (LP64 MKL: MKL_INT is int, the mode
// MKL_INT64), so that a build whose library does not export them still links (and then the fused
// schedule-free step does not run: sqrt_as_aten() is false).
struct MklSqrt {
  void (*single)(int, const float*, float*, long long);
  void (*twice)(int, const double*, double*, long long);
};

const MklSqrt& mkl_sqrt() {
  static const MklSqrt found{reinterpret_cast<decltype(MklSqrt::single)>(dlsym(RTLD_DEFAULT, "vmsSqrt")),
                             reinterpret_cast<decltype(MklSqrt::twice)>(dlsym(RTLD_DEFAULT, "vmdSqrt"))};
  return found;
}

// vml.h's mode: VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE (mkl_vml_defines.h).
constexpr long long kVmlMode = 0x2 | 0x140000 | 0x100;

}  // namespace

bool sqrt_as_aten() { return mkl_sqrt().single && mkl_sqrt().twice; }
void aten_sqrt(float* x, int64_t n) { mkl_sqrt().single(static_cast<int>(n), x, x, kVmlMode); }
void aten_sqrt(double* x, int64_t n) { mkl_sqrt().twice(static_cast<int>(n), x, x, kVmlMode); }
#else
namespace {

template <class T>
void vector_sqrt(T* x, int64_t n) {
  at::vec::map([](at::vec::Vectorized<T> v) { return v.sqrt(); }, x, x, n);
}

}  // namespace

bool sqrt_as_aten() { return true; }  // vml.h without MKL: the vector instruction
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

bool schedule_free_applies(const std::vector<torch::Tensor>& tensors) {
  return applies(tensors) && sqrt_as_aten();
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
  TORCH_CHECK(schedule_free_applies({y, grad, z, exp_avg_sq}) && grad.numel() == y.numel() && z.numel() == y.numel() &&
                  exp_avg_sq.numel() == y.numel(),
              "fused::schedule_free: contiguous float32/float64 CPU tensors of one size and dtype, with torch.sqrt's square root known");
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
