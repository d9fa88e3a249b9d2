// What Adam, AdamW (adam.cpp) and RAdam (radam.cpp) share: the moments m, v and the update count
// t of each parameter (state "step.", "exp_avg.", "exp_avg_sq."), GI-Adam's v_0, the
// preconditioner P of curvature and the stability threshold of the preconditioned sharpness.
#pragma once

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

 protected:
  struct Moments {
    torch::Tensor exp_avg, exp_avg_sq;  // m, v; undefined until the parameter's first update
    int64_t step = 0;                   // t, updates of this parameter
  };
  // m_0 = 0; v_0 = 0, or g_0^2 for GI-Adam (then v_1 = beta2 g_0^2 + (1 - beta2) g_0^2 = g_0^2).
  void init_moments(Moments& m, const torch::Tensor& p, const torch::Tensor& g) const;

  std::vector<Moments> moments_;  // parallel to the parameters
};

}  // namespace normlab::train
