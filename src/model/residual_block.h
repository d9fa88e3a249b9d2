// The one place that knows the normalisation scheme: wraps a sub-layer f (attention or FFN)
// and combines it with its input by norm placement and residual form (docs/conventions.md):
//   post:  LN(r(x) + drop(f(x)))      r(x) = x | x * omega (admin) | alpha * x (deepnorm)
//   pre:   x + drop(f(LN(x)))
//   none:  x + drop(f(x))  |  x + drop(alpha_l * f(x)) (rezero)
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>

#include "model/config.h"

namespace normlab::model {

// Admin's profiling pass (REFERENCE §1, Transformer-Clinic): while active, each block in
// order sets omega_i = r, then r = sqrt(Var(x * omega_i) + Var(drop(f(x)))), biased variances.
struct AdminProfile {
  bool active = false;
  double r = 1.0;
};

using SubLayer = std::function<torch::Tensor(const torch::Tensor&)>;
// Analysis hook (src/analysis): sees a block's LayerNorm input ("ln_input", before the norm)
// and its output ("output"), both (B,T,C) and still in the autograd graph. Unset: no cost.
using BlockObserver = std::function<void(const char* what, const torch::Tensor&)>;

class ResidualBlock {
 public:
  ResidualBlock() = default;
  // Registers on `owner` what the scheme needs: the LayerNorm `norm_name` (post, pre) and
  // Admin's omega `omega_name` (size C). `rezero_alpha` is the owning layer's ReZero scalar,
  // `deepnorm_alpha` the stack's DeepNorm multiplier, `profile` the stack's Admin profiler.
  ResidualBlock(torch::nn::Module& owner, const std::string& norm_name,
                const std::string& omega_name, const ModelConfig& config,
                torch::Tensor rezero_alpha, double deepnorm_alpha,
                std::shared_ptr<AdminProfile> profile);

  // x (B,T,C) -> (B,T,C)
  torch::Tensor forward(const torch::Tensor& x, const SubLayer& f, bool training);

  const torch::nn::LayerNorm& norm() const { return norm_; }  // null when placement is none
  const torch::Tensor& omega() const { return omega_; }       // undefined unless admin
  void set_observer(BlockObserver observer) { observer_ = std::move(observer); }

 private:
  torch::Tensor combine(const torch::Tensor& x, const SubLayer& f, bool training);
  torch::Tensor normalize(const torch::Tensor& x);  // norm_, shown to the observer

  SchemeSettings scheme_;
  double dropout_ = 0.0;
  torch::nn::LayerNorm norm_{nullptr};
  torch::Tensor omega_;
  torch::Tensor rezero_alpha_;
  double deepnorm_alpha_ = 1.0;
  std::shared_ptr<AdminProfile> profile_;
  BlockObserver observer_;
};

}  // namespace normlab::model
