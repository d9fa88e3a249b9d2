// GPT-2's GELU (the tanh form, Hendrycks & Gimpel 2016 eq. for the approximation; transformers'
// gelu_new; ATen's gelu(approximate="tanh")) fused for bf16/fp16 tensors on the CPU:
//   gelu(x) = x/2 (1 + tanh(u)) = x sigmoid(2u),  u = sqrt(2/pi) (x + 0.044715 x^3),
//   gelu'(x) = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 0.044715 x^2),  s = sigmoid(2u),
// in float arithmetic with ATen's vectorised exp, one pass forward and one backward. ATen's own
// kernel computes the same in float through a vectorised tanh that is 3-4x slower than this on
// 2048 x 1024 bf16 (docs/performance.md): GELU was 4% of the decoder-only bf16 training step.
// Only low precision takes this path: fp32 and fp64 keep ATen's (the reference checks and the
// Hessians run there); results may differ from ATen's in the last bf16 bit. Differentiable once.
#pragma once

#include <torch/types.h>

namespace normlab::model::kernels {

// Whether gelu_tanh() takes `x`: bf16 or fp16 on a CPU with AVX2 and FMA.
bool gelu_tanh_apply(const torch::Tensor& x);
// GELU in the tanh form of every element of x (any shape), differentiable once.
torch::Tensor gelu_tanh(const torch::Tensor& x);

}  // namespace normlab::model::kernels
