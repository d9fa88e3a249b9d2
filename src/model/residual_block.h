// The one place that knows the normalisation scheme: wraps a sub-layer f (attention or FFN)
// and combines it with its input by norm placement and residual form (docs/conventions.md):
//   post:  N(r(x) + drop(f(x)))      r(x) = x | x * omega (admin) | alpha * x (deepnorm)
//   pre:   x + drop(f(N(x)))
//   peri:  x + drop(N_out(f(N(x))))  (Peri-LN / sandwich)
//   none:  x + drop(f(x))  |  x + drop(alpha_l * f(x)) (rezero)
// N is the scheme's norm kind (norm.h); the placement is the layer's (stack_layer_placement():
// Mix-LN is post or pre per layer, DT-Fixup's added layers none).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <torch/nn/module.h>

#include "model/config.h"
#include "model/norm.h"

namespace normlab::model {

// Admin's profiling pass (REFERENCE §1, Transformer-Clinic): while active, each block in
// order sets omega_i = r, then r = sqrt(Var(x * omega_i) + Var(drop(f(x)))), biased variances.
struct AdminProfile {
  bool active = false;
  double r = 1.0;
};

// fairseq's names of a block's parameters, `block` being self_attn | encoder_attn | ffn:
// its norm (the FFN block's is `final_layer_norm`), Peri-LN's output norm, Admin's omega.
struct BlockNames {
  std::string norm, output_norm, omega;
};
BlockNames block_names(const std::string& block);

// Where a block sits and what its stack shares with it.
struct BlockContext {
  NormPlacement placement = NormPlacement::kPost;  // the layer's: post | pre | peri | none
  int64_t layer = 0;               // 0-based index of the layer in its stack
  int64_t stack_layers = 0;        // the stack's layers (u-muP's residual weights)
  torch::Tensor rezero_alpha;      // the layer's ReZero scalar (ReZero only)
  double deepnorm_alpha = 1.0;     // the stack's DeepNorm multiplier
  std::shared_ptr<AdminProfile> profile;  // the stack's Admin profiler
};

using SubLayer = std::function<torch::Tensor(const torch::Tensor&)>;
// Analysis hook (src/analysis): sees a block's norm input ("ln_input", before the norm that
// reads the residual stream), its sub-layer's output before dropout ("branch", ReZero's alpha
// applied) and the block's output ("output"), each (B,T,C) and still in the autograd graph.
// Unset: no cost.
using BlockObserver = std::function<void(const char* what, const torch::Tensor&)>;

class ResidualBlock {
 public:
  ResidualBlock() = default;
  // Registers on `owner`, under block_names(block), what the scheme needs: the norm (post,
  // pre, peri), Peri-LN's output norm, Admin's omega (size C).
  ResidualBlock(torch::nn::Module& owner, const std::string& block, const ModelConfig& config,
                const BlockContext& context);

  // x (B,T,C) -> (B,T,C)
  torch::Tensor forward(const torch::Tensor& x, const SubLayer& f, bool training);
  // What forward(x, f) hands f: x normalised where the norm precedes the sub-layer (pre, peri),
  // else x itself.
  torch::Tensor sublayer_input(const torch::Tensor& x);

  NormPlacement placement() const { return placement_; }  // post | pre | peri | none
  const Norm& norm() const { return norm_; }                // null when placement is none
  const Norm& output_norm() const { return output_norm_; }  // Peri-LN only
  const torch::Tensor& omega() const { return omega_; }     // undefined unless admin
  void set_observer(BlockObserver observer) { observer_ = std::move(observer); }

 private:
  torch::Tensor combine(const torch::Tensor& x, const SubLayer& f, bool training);
  torch::Tensor normalize(const torch::Tensor& x);  // norm_, shown to the observer

  NormPlacement placement_ = NormPlacement::kPost;
  ResidualForm residual_ = ResidualForm::kPlain;
  double dropout_ = 0.0;
  Norm norm_{nullptr}, output_norm_{nullptr};
  torch::Tensor omega_;
  torch::Tensor rezero_alpha_;
  double deepnorm_alpha_ = 1.0;
  // u-muP's weights of the skip and the branch, 1/sqrt(1 + tau^2) and tau/sqrt(1 + tau^2)
  // (model/unit_scaling.h); branch 0: a plain sum.
  double unit_skip_ = 1.0, unit_branch_ = 0.0;
  std::shared_ptr<AdminProfile> profile_;
  BlockObserver observer_;
};

}  // namespace normlab::model
