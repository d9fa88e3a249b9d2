#include "model/residual_block.h"

#include <cmath>

#include <torch/torch.h>

#include "model/dropout.h"
#include "model/unit_scaling.h"

namespace normlab::model {

BlockNames block_names(const std::string& block) {
  return {block == "ffn" ? "final_layer_norm" : block + "_layer_norm", block + "_output_layer_norm",
          block + "_omega"};
}

ResidualBlock::ResidualBlock(torch::nn::Module& owner, const std::string& block,
                             const ModelConfig& config, const BlockContext& context)
    : placement_(context.placement),
      residual_(config.scheme.residual),
      dropout_(config.dropout),
      rezero_alpha_(context.rezero_alpha),
      deepnorm_alpha_(context.deepnorm_alpha),
      profile_(context.profile) {
  const auto names = block_names(block);
  const auto kind = config.scheme.norm_kind;
  const double scale = norm_output_scale(config.scheme, context.layer);
  if (placement_ != NormPlacement::kNone)
    norm_ = owner.register_module(names.norm, Norm(kind, config.d_model, scale));
  if (placement_ == NormPlacement::kPeri)
    output_norm_ = owner.register_module(names.output_norm, Norm(kind, config.d_model, scale));
  if (residual_ == ResidualForm::kAdmin)
    omega_ = owner.register_parameter(names.omega, torch::ones({config.d_model}));
  // u-muP's blocks alternate attention and FFN (a single stack: unit_scaling_problems).
  if (unit_scaled(config)) {
    const double tau = unit_residual_tau(2 * context.layer + (block == "ffn" ? 1 : 0), 2 * context.stack_layers,
                                         config.umup);
    unit_skip_ = 1.0 / std::sqrt(1.0 + tau * tau);
    unit_branch_ = tau * unit_skip_;
  }
}

torch::Tensor ResidualBlock::forward(const torch::Tensor& x, const SubLayer& f,
                                     bool training) {
  auto out = combine(x, f, training);
  if (observer_) observer_("output", out);
  return out;
}

torch::Tensor ResidualBlock::sublayer_input(const torch::Tensor& x) {
  return placement_ == NormPlacement::kPre || placement_ == NormPlacement::kPeri ? normalize(x) : x;
}

torch::Tensor ResidualBlock::normalize(const torch::Tensor& x) {
  if (observer_) observer_("ln_input", x);
  return norm_(x);
}

torch::Tensor ResidualBlock::combine(const torch::Tensor& x, const SubLayer& f, bool training) {
  // The sub-layer's output before dropout (bf16/fp16 under mixed precision).
  auto branch = [&](const torch::Tensor& in) {
    auto y = f(in);
    if (residual_ == ResidualForm::kReZero) y = y * rezero_alpha_;
    if (observer_) observer_("branch", y);
    return y;
  };
  // residual + dropout(y), one pass into the residual stream's dtype.
  auto add = [&](const torch::Tensor& residual, const torch::Tensor& y) {
    return model::dropout_add(residual, y, dropout_, training);
  };
  switch (placement_) {
    case NormPlacement::kPre:
      if (unit_branch_ > 0.0)  // U.residual_split / residual_add (no dropout: unit_scaling_problems)
        return x * unit_skip_ + branch(normalize(x)) * unit_branch_;
      return add(x, branch(normalize(x)));
    case NormPlacement::kPeri:
      // Peri-LN (Kim et al. 2025; REFERENCE §10): x + N_out(f(N_in(x))); dropout on the branch.
      return add(x, output_norm_(branch(normalize(x))));
    case NormPlacement::kNone:
      return add(x, branch(x));
    case NormPlacement::kPost:
    case NormPlacement::kMix:  // resolved per layer at construction; never here
      break;
  }
  const bool profiling = profile_ && profile_->active;
  if (profiling) {
    torch::NoGradGuard no_grad;
    omega_.fill_(profile_->r);
  }
  torch::Tensor residual = x;
  if (residual_ == ResidualForm::kAdmin) residual = x * omega_;
  if (residual_ == ResidualForm::kDeepNorm) residual = x * deepnorm_alpha_;
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
