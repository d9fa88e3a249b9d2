// One norm of the model, of the kind the scheme names (REFERENCE §1, §10), with PyTorch's
// parameter names so that exported weights load by name:
//   layernorm: weight * (x - mean) / sqrt(var + eps) + bias       (nn.LayerNorm, eps 1e-5)
//   rmsnorm:   weight * x / sqrt(mean(x^2) + eps)                  (nn.RMSNorm; no bias)
//   dyt:       weight * tanh(alpha * x) + bias, alpha one scalar    (DyT's DynamicTanh)
// times a constant `scale` (LayerNorm scaling's 1/sqrt(l); 1 otherwise). Over the last
// dimension; computed in float32 from a bf16/fp16 input, as autocast does for layer_norm.
#pragma once

#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "model/config.h"

namespace normlab::model {

inline constexpr double kNormEps = 1e-5;       // LayerNorm and RMSNorm
inline constexpr double kDyTAlphaInit = 0.5;   // Zhu et al. 2025, the default of their code

class NormImpl : public torch::nn::Module {
 public:
  NormImpl(NormKind kind, int64_t dim, double scale = 1.0);
  torch::Tensor forward(const torch::Tensor& x) const;  // (..., dim) -> (..., dim)

  NormKind kind() const { return kind_; }
  double scale() const { return scale_; }

  torch::Tensor weight;  // (dim)
  torch::Tensor bias;    // (dim); undefined for rmsnorm
  torch::Tensor alpha;   // (1); dyt only

 private:
  NormKind kind_;
  int64_t dim_;
  double scale_;
};
TORCH_MODULE(Norm);

}  // namespace normlab::model
