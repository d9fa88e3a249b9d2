// --optimizer sgd: torch.optim.SGD (sgd.py, PyTorch 2.x): L2 weight decay in the gradient,
// heavy-ball momentum with dampening 0, optional Nesterov.
#include <torch/torch.h>

#include "train/optimizers/optimizers.h"

namespace normlab::train {
namespace {

constexpr const char* kMomentum = "momentum_buffer";

class Sgd final : public OptimizerAlgorithm {
 public:
  Sgd(const OptimizerConfig& config, size_t parameters) : OptimizerAlgorithm(config), buffers_(parameters) {}

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
  std::vector<torch::Tensor> buffers_;  // momentum buffers, undefined until first used
};

}  // namespace

std::unique_ptr<OptimizerAlgorithm> make_sgd(const OptimizerConfig& config, size_t parameters) {
  return std::make_unique<Sgd>(config, parameters);
}

}  // namespace normlab::train
