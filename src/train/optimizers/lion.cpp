// --optimizer lion: Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"
// (arXiv 2302.06675), Algorithm 2, Lion with decoupled weight decay (REFERENCE §11):
//   p *= 1 - lr wd                       (decoupled, as AdamW; --weight-decay-mode independent:
//                                         wd / lr_peak, as lion-pytorch's decoupled_weight_decay)
//   c  = b1 m + (1 - b1) g
//   p -= lr sign(c)                      (sign(0) = 0)
//   m  = b2 m + (1 - b2) g
// in the order and with the operations of lucidrains' lion-pytorch (lion_pytorch.py, update_fn),
// which tests/train/optimizer_reference.py compares with. State: m ("exp_avg."), zero before a
// parameter's first update; no step count (Lion has no bias correction).
#include <map>
#include <tuple>

#include <torch/torch.h>

#include "train/optimizers/fused_step.h"
#include "train/optimizers/optimizers.h"

namespace normlab::train {
namespace {

constexpr const char* kExpAvg = "exp_avg";

class Lion final : public OptimizerAlgorithm {
 public:
  Lion(const OptimizerConfig& config, size_t parameters) : OptimizerAlgorithm(config), exp_avg_(parameters) {}

  // One group per lr scale, dtype and device (torch.optim's parameter groups): fused on the CPU,
  // else _foreach calls (on CUDA each is one multi-tensor kernel launch for the whole group).
  void step(const NamedTensors& params, const std::vector<size_t>& ready, const std::vector<double>& lr_scales,
            double lr) override {
    std::map<std::tuple<double, c10::ScalarType, c10::DeviceType, c10::DeviceIndex>, std::vector<size_t>> groups;
    for (size_t i : ready) {
      const auto& p = params[i].second;
      groups[{lr_scales[i], p.scalar_type(), p.device().type(), p.device().index()}].push_back(i);
    }
    for (const auto& [key, members] : groups) {
      std::vector<torch::Tensor> ps, gs, ms;
      for (size_t i : members) {
        const auto& p = params[i].second;
        ps.push_back(p);
        gs.push_back(p.grad());
        ms.push_back(moment(i, p));
      }
      update_group(ps, gs, ms, lr * std::get<0>(key));
    }
  }

  void save_state(const NamedTensors& params, TensorMap& out) const override {
    for (size_t i = 0; i < params.size(); ++i)
      if (exp_avg_[i].defined()) out[state_key(kExpAvg, params[i].first)] = exp_avg_[i].detach().clone();
  }

  void load_state(StateReader& in) override {
    for (size_t i = 0; i < exp_avg_.size(); ++i) exp_avg_[i] = in.tensor(kExpAvg, i);
  }

  // None known: the sign update moves every coordinate by lr whatever the curvature, so on a
  // quadratic it does not diverge above some lambda_1 as gradient descent and Adam do (Cohen et
  // al. 2021, 2022); it oscillates at amplitude ~lr instead. Curvature refuses lion.
  std::optional<double> stability_threshold(double) const override { return std::nullopt; }

 protected:
  void update(const torch::Tensor& p, const torch::Tensor& grad, size_t i, double lr) override {
    update_group({p}, {grad}, {moment(i, p)}, lr);
  }

 private:
  torch::Tensor& moment(size_t i, const torch::Tensor& p) {
    auto& m = exp_avg_[i];
    if (!m.defined()) m = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    return m;
  }

  // Chen et al.'s Algorithm 2 on parameters of one dtype and device at rate lr (lr scale
  // included): one pass per parameter where fused_step.h applies (float32/float64 on the CPU),
  // else lion-pytorch's update_fn as _foreach calls. Both make its operations in its order, so
  // that float32 agrees with it.
  void update_group(const std::vector<torch::Tensor>& ps, const std::vector<torch::Tensor>& gs,
                    const std::vector<torch::Tensor>& ms, double lr) const {
    const auto& c = config();
    const auto [beta1, beta2] = c.betas;
    const double wd = c.decoupled_weight_decay();  // --weight-decay, or its independent form
    std::vector<torch::Tensor> all(ps);
    all.insert(all.end(), gs.begin(), gs.end());
    all.insert(all.end(), ms.begin(), ms.end());
    if (fused::applies(all)) {
      for (size_t j = 0; j < ps.size(); ++j) fused::lion(ps[j], gs[j], ms[j], {lr, wd, beta1, beta2});
      return;
    }
    if (wd != 0.0) torch::_foreach_mul_(ps, 1.0 - lr * wd);  // decoupled weight decay
    auto direction = torch::_foreach_mul(ms, beta1);          // c = b1 m + (1 - b1) g
    torch::_foreach_add_(direction, gs, 1.0 - beta1);
    torch::_foreach_sign_(direction);
    torch::_foreach_add_(ps, direction, -lr);  // p -= lr sign(c)
    torch::_foreach_mul_(ms, beta2);           // m = b2 m + (1 - b2) g
    torch::_foreach_add_(ms, gs, 1.0 - beta2);
  }

  std::vector<torch::Tensor> exp_avg_;  // m, parallel to the parameters; undefined until first used
};

}  // namespace

std::unique_ptr<OptimizerAlgorithm> make_lion(const OptimizerConfig& config, size_t parameters) {
  return std::make_unique<Lion>(config, parameters);
}

}  // namespace normlab::train
