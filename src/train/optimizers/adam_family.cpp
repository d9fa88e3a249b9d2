#include "train/optimizers/adam_family.h"

#include <cmath>

#include <torch/torch.h>

namespace normlab::train {
namespace {

// Per-parameter state, "<prefix>.<parameter name>".
constexpr const char* kStep = "step";
constexpr const char* kExpAvg = "exp_avg";
constexpr const char* kExpAvgSq = "exp_avg_sq";

}  // namespace

void AdamFamily::init_moments(Moments& m, const torch::Tensor& p, const torch::Tensor& g) const {
  m.exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
  m.exp_avg_sq = config().adam_init_v == AdamInitV::kGradSquared ? g.square()
                                                                 : torch::zeros_like(p, torch::MemoryFormat::Preserve);
}

void AdamFamily::save_state(const NamedTensors& params, TensorMap& out) const {
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& name = params[i].first;
    const auto& m = moments_[i];
    if (!m.exp_avg.defined()) continue;
    out[state_key(kStep, name)] = torch::tensor(m.step, torch::kInt64);
    out[state_key(kExpAvg, name)] = m.exp_avg.detach().clone();
    out[state_key(kExpAvgSq, name)] = m.exp_avg_sq.detach().clone();
  }
}

void AdamFamily::load_state(StateReader& in) {
  for (size_t i = 0; i < moments_.size(); ++i) {
    auto& m = moments_[i];
    m.exp_avg = in.tensor(kExpAvg, i);
    m.exp_avg_sq = in.tensor(kExpAvgSq, i);
    const auto step = in.count(kStep, i);
    if (m.exp_avg.defined() != m.exp_avg_sq.defined() || m.exp_avg.defined() != step.has_value())
      throw state_error("'" + in.parameters()[i].first + "' needs all or none of step, exp_avg and exp_avg_sq");
    m.step = step.value_or(0);
  }
}

// Cohen et al. 2022 (REFERENCE §9): Adam with momentum beta1 on a quadratic is stable while
// lambda_1(P^-1 H) < (2 + 2 beta1)/((1 - beta1) lr), 38/lr at beta1 = 0.9, for their P with the
// first moment's correction in it (kCohen, kNext; docs/curvature.md). RAdam is held to it too.
std::optional<double> AdamFamily::stability_threshold(double lr) const {
  const double beta1 = config().betas[0];
  return (2.0 + 2.0 * beta1) / ((1.0 - beta1) * lr);
}

// RAdam's rectified update divides by sqrt(v_t) + eps with another scale; it is measured with
// Adam's P (docs/curvature.md).
void AdamFamily::preconditioner(torch::Tensor out, size_t i, Preconditioner kind, const torch::Tensor& gradient) const {
  const auto& c = config();
  const auto [beta1, beta2] = c.betas;
  const auto& m = moments_[i];
  const int64_t t = m.step;
  auto v_t = m.exp_avg_sq.defined() ? m.exp_avg_sq.detach().reshape(-1).to(out.dtype()) : torch::zeros_like(out);
  if (kind != Preconditioner::kNext) {
    // The denominator of update t: sqrt(v_t / (1 - beta2^t)) + eps (v_t = 0 before any: eps).
    const double bc2 = t > 0 ? 1.0 - std::pow(beta2, static_cast<double>(t)) : 1.0;
    out.copy_((v_t / bc2).sqrt_().add_(c.eps));
    // Cohen et al. 2022 (§2, Adam as preconditioned heavy ball: w_{t+1} = w_t - lr P_t^-1 m_t
    // with P_t = (1 - beta1^{t+1})[diag(sqrt(v_t / (1 - beta2^{t+1}))) + eps I], t from 0) move
    // the first moment's correction into P (0 before the first update: curvature writes null).
    if (kind == Preconditioner::kCohen) out.mul_(1.0 - std::pow(beta1, static_cast<double>(t)));
  } else {
    // Kalra & Barkeshli's (why-warmup, pre_hessian_lobpcg_custom_step): the second moment the
    // next update would have, bias-corrected, and the first moment's correction 1 - beta1^{t+1}.
    const auto& g = gradient;
    auto v_next = (t == 0 && c.adam_init_v == AdamInitV::kGradSquared) ? g.square()
                                                                         : v_t.mul(beta2).addcmul_(g, g, 1.0 - beta2);
    const double next = static_cast<double>(t + 1);
    const double bc2 = 1.0 - std::pow(beta2, next), bc1 = 1.0 - std::pow(beta1, next);
    out.copy_((v_next / bc2).sqrt_().add_(c.eps).mul_(bc1));
  }
}

}  // namespace normlab::train
