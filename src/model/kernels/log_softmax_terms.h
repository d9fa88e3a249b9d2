// The two per-token terms of the label-smoothed loss (REFERENCE §2), fused for bf16/fp16
// logits on the CPU: nll_i = lse_i - l_i[t_i] and smooth_i = V lse_i - sum_v l_iv, with
// lse_i = log sum_v exp(l_iv), in float arithmetic (REFERENCE §7). One read of the logits
// forward and one write of their gradient backward (ATen's vectorised exp), instead of a float
// copy of the (N,V) logits, log_softmax, gather, sum and the backward of each
// (docs/performance.md). Differentiable once: only low precision takes this path, and nothing
// that needs a second derivative (Hessians, HVPs) runs in low precision.
#pragma once

#include <torch/types.h>

namespace normlab::model::kernels {

struct LogSoftmaxTerms {
  torch::Tensor nll, smooth;  // (N) float32
};

// Whether log_softmax_terms() takes `logits`: bf16 or fp16 on a CPU with AVX2 and FMA.
bool log_softmax_terms_apply(const torch::Tensor& logits);
// logits (N,V) bf16/fp16, target (N) int64 in [0, V).
LogSoftmaxTerms log_softmax_terms(const torch::Tensor& logits, const torch::Tensor& target);

}  // namespace normlab::model::kernels
