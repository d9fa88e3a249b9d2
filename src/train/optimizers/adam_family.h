// What Adam, AdamW (adam.cpp; also muon.cpp's AdamW part) and RAdam (radam.cpp) share: the moments m, v and the update count
// t of each parameter (state "step.", "exp_avg.", "exp_avg_sq."), GI-Adam's v_0, the
// preconditioner P of curvature and the stability threshold of the preconditioned sharpness.
#pragma once

#include <memory>
#include <vector>

#include "train/optimizer_algorithm.h"

namespace normlab::train {

class AdamFamily : public OptimizerAlgorithm {
 public:
  AdamFamily(const OptimizerConfig& config, size_t parameters) : OptimizerAlgorithm(config), moments_(parameters) {}

  void save_state(const NamedTensors& params, TensorMap& out) const override;
  void load_state(StateReader& in) override;
  std::optional<double> stability_threshold(double lr) const override;
  bool preconditioned() const override { return true; }
  void preconditioner(torch::Tensor out, size_t i, Preconditioner kind, const torch::Tensor& gradient) const override;
  // Whether parameter i has moments (an update, or a loaded state).
  bool has_moments(size_t i) const { return moments_[i].exp_avg.defined(); }

 protected:
  struct Moments {
    torch::Tensor exp_avg, exp_avg_sq;  // m, v; undefined until the parameter's first update
    int64_t step = 0;                   // t, updates of this parameter
  };
  // m_0 = 0; v_0 = 0, or g_0^2 for GI-Adam (then v_1 = beta2 g_0^2 + (1 - beta2) g_0^2 = g_0^2).
  void init_moments(Moments& m, const torch::Tensor& p, const torch::Tensor& g) const;

  std::vector<Moments> moments_;  // parallel to the parameters
};

// AdamW (adam.cpp: ATen's fused kernel, else torch.optim's single-tensor code) as the Adam family,
// for an optimiser that hands it some of its parameters: muon.cpp gives it all but Muon's; its
// step(params, ready, ...) updates those of `ready` alone, and only they get moments.
std::unique_ptr<AdamFamily> make_adamw_family(const OptimizerConfig& config, size_t parameters);

}  // namespace normlab::train
