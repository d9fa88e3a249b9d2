// --optimizer radam: Liu et al. 2020 (REFERENCE §1) as the authors' radam.py computes it, in its
// order: rectified Adam with decoupled weight decay, and --radam-fallback while rho_t < 5.
#include <cmath>

#include <torch/torch.h>

#include "train/optimizers/adam_family.h"
#include "train/optimizers/optimizers.h"

namespace normlab::train {
namespace {

class RAdam final : public AdamFamily {
 public:
  using AdamFamily::AdamFamily;

 protected:
  void update(const torch::Tensor& p, const torch::Tensor& grad, size_t i, double lr) override;
};

void RAdam::update(const torch::Tensor& p, const torch::Tensor& grad, size_t i, double lr) {
  const auto& c = config();
  const double wd = c.weight_decay;
  const auto [beta1, beta2] = c.betas;
  auto& m = moments_[i];
  if (!m.exp_avg.defined()) init_moments(m, p, grad);
  m.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1.0 - beta2);
  m.exp_avg.mul_(beta1).add_(grad, 1.0 - beta1);
  ++m.step;
  // REFERENCE §1: rho_inf = 2/(1-beta2) - 1, rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t).
  const auto t = static_cast<double>(m.step);
  const double beta2_t = std::pow(beta2, t);
  const double rho_inf = 2.0 / (1.0 - beta2) - 1.0;
  const double rho_t = rho_inf - 2.0 * t * beta2_t / (1.0 - beta2_t);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  if (rho_t >= 5.0) {
    // r_t sqrt(1 - beta2^t) / (1 - beta1^t), with the authors' grouping of the factors.
    const double step_size = std::sqrt((1.0 - beta2_t) * (rho_t - 4.0) / (rho_inf - 4.0) * (rho_t - 2.0) / rho_t *
                                       rho_inf / (rho_inf - 2.0)) /
                             bias_correction1;
    if (wd != 0.0) p.add_(p, -wd * lr);
    auto denom = m.exp_avg_sq.sqrt().add_(c.eps);
    p.addcdiv_(m.exp_avg, denom, -step_size * lr);
  } else if (c.radam_fallback == RAdamFallback::kSgd) {
    if (wd != 0.0) p.add_(p, -wd * lr);
    p.add_(m.exp_avg, -(1.0 / bias_correction1) * lr);
  }
}

}  // namespace

std::unique_ptr<OptimizerAlgorithm> make_radam(const OptimizerConfig& config, size_t parameters) {
  return std::make_unique<RAdam>(config, parameters);
}

}  // namespace normlab::train
