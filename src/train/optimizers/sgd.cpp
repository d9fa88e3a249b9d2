// --optimizer sgd: torch.optim.SGD (sgd.py, PyTorch 2.x): L2 weight decay in the gradient,
// heavy-ball momentum with dampening 0, optional Nesterov; in ATen's fused kernel where it applies
// (torch.optim.SGD(fused=True)), otherwise in its single-tensor code.
#include <map>
#include <tuple>

#include <torch/torch.h>

#include "train/optimizers/optimizers.h"

namespace normlab::train {
namespace {

constexpr const char* kMomentum = "momentum_buffer";

class Sgd final : public OptimizerAlgorithm {
 public:
  Sgd(const OptimizerConfig& config, size_t parameters) : OptimizerAlgorithm(config), buffers_(parameters) {}

  void step(const NamedTensors& params, const std::vector<size_t>& ready, const std::vector<double>& lr_scales,
            double lr) override {
    if (!fused_update(params, ready, lr_scales, lr)) OptimizerAlgorithm::step(params, ready, lr_scales, lr);
  }

  void save_state(const NamedTensors& params, TensorMap& out) const override {
    for (size_t i = 0; i < params.size(); ++i)
      if (buffers_[i].defined()) out[state_key(kMomentum, params[i].first)] = buffers_[i].detach().clone();
  }

  void load_state(StateReader& in) override {
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i] = in.tensor(kMomentum, i);
  }

  // Gradient descent with heavy-ball momentum mu on a quadratic is stable while the curvature
  // is below (2 + 2 mu)/lr, 2/lr without momentum (Gilmer et al. 2021, Cohen et al. 2021; REFERENCE §9).
  std::optional<double> stability_threshold(double lr) const override {
    return (2.0 + 2.0 * config().momentum) / lr;
  }
  bool scales_weight_decay() const override { return true; }

 protected:
  void update(const torch::Tensor& p, const torch::Tensor& grad, size_t i, double lr) override {
    const auto& c = config();
    const double wd = c.weight_decay * weight_decay_scale(i);
    auto g = wd != 0.0 ? grad.add(p, wd) : grad;
    if (c.momentum != 0.0) {
      auto& buf = buffers_[i];
      if (!buf.defined()) {
        buf = g.detach().clone();
      } else {
        buf.mul_(c.momentum).add_(g);  // dampening 0
      }
      g = c.nesterov ? g.add(buf, c.momentum) : buf;
    }
    p.add_(g, -lr);
  }

 private:
  bool fused_update(const NamedTensors& params, const std::vector<size_t>& ready, const std::vector<double>& lr_scales,
                    double lr);

  std::vector<torch::Tensor> buffers_;  // momentum buffers, undefined until first used
};

// torch.optim.SGD(fused=True)'s kernel (_fused_sgd_): one pass reading each parameter, its gradient
// and its momentum buffer, where update() makes up to four passes and a temporary (the same
// formulas; results equal to rounding, tests/train/optimizer_reference.py holds both to torch.optim).
// A first step's buffer is the gradient (after the L2 term), as update()'s clone: the kernel writes
// it when told is_first_step. One call per group of equal lr and weight-decay scales, dtype, device
// and first step or not. False (nothing done) for a non-contiguous tensor or a gradient of another
// dtype.
bool Sgd::fused_update(const NamedTensors& params, const std::vector<size_t>& ready,
                       const std::vector<double>& lr_scales, double lr) {
  const auto& c = config();
  for (size_t i : ready) {
    const auto& p = params[i].second;
    if (!p.is_contiguous() || !p.grad().is_contiguous() || p.grad().scalar_type() != p.scalar_type() ||
        (buffers_[i].defined() && !buffers_[i].is_contiguous()))
      return false;
  }
  const bool momentum = c.momentum != 0.0;
  std::map<std::tuple<double, double, c10::ScalarType, c10::DeviceType, c10::DeviceIndex, bool>, std::vector<size_t>>
      groups;
  for (size_t i : ready) {
    const auto& p = params[i].second;
    const bool first = momentum && !buffers_[i].defined();
    if (first) buffers_[i] = torch::empty_like(p);
    groups[{lr_scales[i], weight_decay_scale(i), p.scalar_type(), p.device().type(), p.device().index(), first}]
        .push_back(i);
  }
  for (const auto& [key, members] : groups) {
    std::vector<torch::Tensor> ps, gs, bufs;
    for (size_t i : members) {
      ps.push_back(params[i].second);
      gs.push_back(params[i].second.grad());
      if (momentum) bufs.push_back(buffers_[i]);
    }
    at::_fused_sgd_(ps, gs, bufs, c.weight_decay * std::get<1>(key), c.momentum, lr * std::get<0>(key),
                    /*dampening=*/0.0, c.nesterov, /*maximize=*/false, /*is_first_step=*/std::get<5>(key));
  }
  return true;
}

}  // namespace

std::unique_ptr<OptimizerAlgorithm> make_sgd(const OptimizerConfig& config, size_t parameters) {
  return std::make_unique<Sgd>(config, parameters);
}

}  // namespace normlab::train
