#include "model/residual_block.h"

#include <cmath>

#include <torch/torch.h>

#include "model/dropout.h"

namespace normlab::model {

constexpr double kLayerNormEps = 1e-5;

ResidualBlock::ResidualBlock(torch::nn::Module& owner, const std::string& norm_name,
                             const std::string& omega_name, const ModelConfig& config,
                             torch::Tensor rezero_alpha, double deepnorm_alpha,
                             std::shared_ptr<AdminProfile> profile)
    : scheme_(config.scheme),
      dropout_(config.dropout),
      rezero_alpha_(std::move(rezero_alpha)),
      deepnorm_alpha_(deepnorm_alpha),
      profile_(std::move(profile)) {
  if (scheme_.norm != NormPlacement::kNone) {
    norm_ = owner.register_module(
        norm_name,
        torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model}).eps(kLayerNormEps)));
  }
  if (scheme_.residual == ResidualForm::kAdmin) {
    omega_ = owner.register_parameter(omega_name, torch::ones({config.d_model}));
  }
}

torch::Tensor ResidualBlock::forward(const torch::Tensor& x, const SubLayer& f,
                                     bool training) {
  auto out = combine(x, f, training);
  if (observer_) observer_("output", out);
  return out;
}

torch::Tensor ResidualBlock::normalize(const torch::Tensor& x) {
  if (observer_) observer_("ln_input", x);
  return norm_(x);
}

torch::Tensor ResidualBlock::combine(const torch::Tensor& x, const SubLayer& f, bool training) {
  // The sub-layer's output before dropout (bf16/fp16 under mixed precision).
  auto branch = [&](const torch::Tensor& in) {
    auto y = f(in);
    if (scheme_.residual == ResidualForm::kReZero) y = y * rezero_alpha_;
    return y;
  };
  // residual + dropout(y), one pass into the residual stream's dtype.
  auto add = [&](const torch::Tensor& residual, const torch::Tensor& y) {
    return model::dropout_add(residual, y, dropout_, training);
  };
  switch (scheme_.norm) {
    case NormPlacement::kPre:
      return add(x, branch(normalize(x)));
    case NormPlacement::kNone:
      return add(x, branch(x));
    case NormPlacement::kPost:
      break;
  }
  const bool profiling = profile_ && profile_->active;
  if (profiling) {
    torch::NoGradGuard no_grad;
    omega_.fill_(profile_->r);
  }
  torch::Tensor residual = x;
  if (scheme_.residual == ResidualForm::kAdmin) residual = x * omega_;
  if (scheme_.residual == ResidualForm::kDeepNorm) residual = x * deepnorm_alpha_;
  auto y = branch(x);
  if (profiling) {
    // Biased variances (np.var in Transformer-Clinic) over the whole tensor, padding included,
    // of the sub-layer's output after dropout (Admin profiles in training mode).
    const auto var = [](const torch::Tensor& t) { return t.detach().var(/*unbiased=*/false).item<double>(); };
    y = model::dropout(y, dropout_, training);
    profile_->r = std::sqrt(var(residual) + var(y));
    return normalize(residual + y);
  }
  return normalize(add(residual, y));
}

}  // namespace normlab::model
