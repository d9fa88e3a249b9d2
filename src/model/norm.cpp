#include "model/norm.h"

#include <torch/torch.h>

#include "model/precision.h"

namespace normlab::model {

NormImpl::NormImpl(NormKind kind, int64_t dim, double scale) : kind_(kind), dim_(dim), scale_(scale) {
  weight = register_parameter("weight", torch::ones({dim}));
  if (kind != NormKind::kRMSNorm) bias = register_parameter("bias", torch::zeros({dim}));
  if (kind == NormKind::kDyT) alpha = register_parameter("alpha", torch::full({1}, kDyTAlphaInit));
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) const {
  torch::Tensor y;
  switch (kind_) {
    case NormKind::kLayerNorm:
      // What torch::nn::LayerNorm computes; autocast runs it in float32.
      y = torch::layer_norm(x, {dim_}, weight, bias, kNormEps);
      break;
    case NormKind::kRMSNorm: {
      // Zhang & Sennrich 2019, Eq. 4: a_i / RMS(a) * g_i, RMS(a) = sqrt(mean(a^2) + eps).
      auto xf = float_if_reduced(x);
      y = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + kNormEps) * weight;
      break;
    }
    case NormKind::kDyT:
      // Zhu et al. 2025, Eq. 1: DyT(x) = gamma * tanh(alpha x) + beta.
      y = torch::addcmul(bias, torch::tanh(float_if_reduced(x) * alpha), weight);
      break;
  }
  return scale_ == 1.0 ? y : y * scale_;
}

}  // namespace normlab::model
