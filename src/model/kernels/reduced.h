// What normlab's fused bf16/fp16 kernels (log_softmax_terms.h, gelu_tanh.h) share: whether a
// tensor takes them, and the call of a kernel template at the tensor's element type.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/types.h>

#include "model/kernels/cpu_features.h"

namespace normlab::model::kernels {

// A bf16 or fp16 tensor on a CPU with AVX2 and FMA (the row kernels' AVX2 builds run).
inline bool reduced_on_avx2_cpu(const torch::Tensor& t) {
  const auto type = t.scalar_type();
  return avx2_fma() && t.device().is_cpu() && (type == torch::kBFloat16 || type == torch::kHalf);
}

// f(c10::BFloat16()) for bf16, else f(c10::Half()): f's argument names the element type.
template <class F>
void dispatch_reduced(c10::ScalarType type, F&& f) {
  if (type == torch::kBFloat16) f(c10::BFloat16());
  else f(c10::Half());
}

}  // namespace normlab::model::kernels
