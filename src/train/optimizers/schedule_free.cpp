// --optimizer adamw-schedulefree: Schedule-Free AdamW (Defazio et al. 2024, "The Road Less
// Scheduled", arXiv 2405.15682, Algorithm 1), as AdamWScheduleFree of schedulefree 1.4.1
// (adamw_schedulefree.py, its foreach path) computes it, its operations in its order
// (tests/train/optimizer_reference.py compares with it). Three points per parameter: z (the base
// iterates), x (their weighted average: where the model is evaluated) and y = (1 - b1) z + b1 x
// (where gradients are taken: the parameters while training), §2's
//   y_t = (1 - b1) z_t + b1 x_t,  z_{t+1} = z_t - lr g(y_t),  x_{t+1} = (1 - c_{t+1}) x_t + c_{t+1} z_{t+1}
// with Adam's normalisation of g. With k updates done, at the given rate lr (lr scale included):
//   lr_k   = lr min(1, (k + 1)/W)                 own linear warm-up, W = --warmup-steps
//   lr_max = max(lr_max, lr_k)
//   w      = (k + 1)^r lr_max^p;  c = w / (sum of the w so far)   (c = 0 while the sum is 0)
//   v      = b2 v + (1 - b2) g^2
//   d      = g / (sqrt(v / (1 - b2^(k+1))) + eps) + wd y           (weight decay at y)
//   y      = (1 - c) y + c z + lr_k (b1 (1 - c) - 1) d             (x's and z's steps moved onto y)
//   z     -= lr_k d
// x is never stored: x = (y - (1 - b1) z) / b1 where the model is evaluated (to_evaluation_point).
// State: "z." and "exp_avg_sq." per parameter; k, the sum of weights, lr_max and the point the
// parameters are at once ("schedule_free.*"), as schedulefree keeps them per parameter group.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include <torch/torch.h>

#include "train/optimizers/fused_step.h"
#include "train/optimizers/optimizers.h"

namespace normlab::train {
namespace {

constexpr const char* kZ = "z";
constexpr const char* kExpAvgSq = "exp_avg_sq";
constexpr const char* kStepKey = "schedule_free.step";
constexpr const char* kWeightSumKey = "schedule_free.weight_sum";
constexpr const char* kLrMaxKey = "schedule_free.lr_max";
constexpr const char* kEvaluationPointKey = "schedule_free.evaluation_point";

// One update's scalars, the same for every parameter (schedulefree: per parameter group).
struct Coefficients {
  double lr = 0;                 // lr_k, the warmed-up rate (before a parameter's lr scale)
  double c = 0;                  // the average's weight of z_{t+1}, schedulefree's ckp1
  double bias_correction2 = 1;   // 1 - b2^(k+1)
};

class AdamWScheduleFree final : public OptimizerAlgorithm {
 public:
  AdamWScheduleFree(const OptimizerConfig& config, size_t parameters)
      : OptimizerAlgorithm(config), z_(parameters), exp_avg_sq_(parameters) {}

  // The update's scalars, then one group per lr scale, dtype and device (torch.optim's parameter
  // groups): fused on the CPU, else _foreach calls (on CUDA one multi-tensor kernel per call and group).
  void step(const NamedTensors& params, const std::vector<size_t>& ready, const std::vector<double>& lr_scales,
            double lr) override {
    now_ = advance(lr);
    std::map<std::tuple<double, c10::ScalarType, c10::DeviceType, c10::DeviceIndex>, std::vector<size_t>> groups;
    for (size_t i : ready) {
      const auto& p = params[i].second;
      groups[{lr_scales[i], p.scalar_type(), p.device().type(), p.device().index()}].push_back(i);
    }
    for (const auto& [key, members] : groups) {
      std::vector<torch::Tensor> ps, gs, zs, vs;
      for (size_t i : members) {
        const auto& p = params[i].second;
        init_state(i, p);
        ps.push_back(p);
        gs.push_back(p.grad());
        zs.push_back(z_[i]);
        vs.push_back(exp_avg_sq_[i]);
      }
      update_group(ps, gs, zs, vs, now_.lr * std::get<0>(key));
    }
  }

  // schedulefree's eval(): y -> x = y + (1 - 1/b1)(z - y); parameters without state stay (x = y = z).
  void to_evaluation_point(const NamedTensors& params) override {
    if (at_x_) return;
    move(params, 1.0 - 1.0 / config().betas[0]);
    at_x_ = true;
  }

  // schedulefree's train(): x -> y = x + (1 - b1)(z - x). Not bit for bit the y left: a
  // resumed run and an uninterrupted one both make this move at the checkpoint, so they agree.
  void to_training_point(const NamedTensors& params) override {
    if (!at_x_) return;
    move(params, 1.0 - config().betas[0]);
    at_x_ = false;
  }

  bool at_evaluation_point() const override { return at_x_; }

  void save_state(const NamedTensors& params, TensorMap& out) const override {
    for (size_t i = 0; i < params.size(); ++i) {
      if (!z_[i].defined()) continue;
      out[state_key(kZ, params[i].first)] = z_[i].detach().clone();
      out[state_key(kExpAvgSq, params[i].first)] = exp_avg_sq_[i].detach().clone();
    }
    out[kStepKey] = torch::tensor(step_, torch::kInt64);
    out[kWeightSumKey] = torch::tensor(weight_sum_, torch::kFloat64);
    out[kLrMaxKey] = torch::tensor(lr_max_, torch::kFloat64);
    out[kEvaluationPointKey] = torch::tensor(static_cast<int64_t>(at_x_), torch::kInt64);
  }

  void load_state(StateReader& in) override {
    for (size_t i = 0; i < z_.size(); ++i) {
      z_[i] = in.tensor(kZ, i);
      exp_avg_sq_[i] = in.tensor(kExpAvgSq, i);
      if (z_[i].defined() != exp_avg_sq_[i].defined())
        throw state_error("'" + in.parameters()[i].first + "' needs both or none of z and exp_avg_sq");
    }
    const auto step = in.count(kStepKey);
    const auto weight_sum = in.number(kWeightSumKey), lr_max = in.number(kLrMaxKey);
    const auto at_x = in.count(kEvaluationPointKey);
    if (!step || !weight_sum || !lr_max || !at_x || *at_x > 1)
      throw state_error(std::string("--optimizer adamw-schedulefree needs ") + kStepKey + ", " + kWeightSumKey +
                        ", " + kLrMaxKey + " and " + kEvaluationPointKey + " (0 or 1)");
    step_ = *step;
    weight_sum_ = *weight_sum;
    lr_max_ = *lr_max;
    at_x_ = *at_x == 1;
  }

  // None known (docs/optimisers.md): on a quadratic the step is a time-varying linear map (c
  // falls from 1 to ~1/t): gradient descent's 2/lr while c = 1, 2/((1 - b1) lr) on lambda(P^-1 H)
  // as c -> 0 with x held; Defazio et al. give no threshold. Curvature refuses adamw-schedulefree.
  std::optional<double> stability_threshold(double) const override { return std::nullopt; }

 protected:
  // One parameter at the scalars of the step under way (step() updates them all together).
  void update(const torch::Tensor& p, const torch::Tensor& grad, size_t i, double lr) override {
    init_state(i, p);
    update_group({p}, {grad}, {z_[i]}, {exp_avg_sq_[i]}, lr);
  }

 private:
  // The update's scalars at the given rate, and k, lr_max and the sum of weights advanced, as
  // schedulefree's step() before its parameter loop (every step, whichever parameters have a gradient).
  Coefficients advance(double lr) {
    const auto& c = config();
    const double beta2 = c.betas[1];
    const auto k = static_cast<double>(step_);
    const double sched = step_ < c.warmup_steps ? (k + 1.0) / static_cast<double>(c.warmup_steps) : 1.0;
    Coefficients out;
    out.bias_correction2 = 1.0 - std::pow(beta2, k + 1.0);
    out.lr = lr * sched;
    lr_max_ = std::max(out.lr, lr_max_);
    const double weight = std::pow(k + 1.0, c.schedule_free_r) * std::pow(lr_max_, c.schedule_free_weight_lr_power);
    weight_sum_ += weight;
    out.c = weight_sum_ != 0.0 ? weight / weight_sum_ : 0.0;  // schedulefree: 0 on ZeroDivisionError
    ++step_;
    return out;
  }

  // z_0 = y_0 (= x_0), v_0 = 0, at a parameter's first update.
  void init_state(size_t i, const torch::Tensor& p) {
    if (z_[i].defined()) return;
    z_[i] = p.detach().clone(torch::MemoryFormat::Preserve);
    exp_avg_sq_[i] = torch::zeros_like(p, torch::MemoryFormat::Preserve);
  }

  // The formulas above on parameters of one dtype and device at rate lr (lr_k, lr scale included):
  // one pass per parameter where fused_step.h applies (float32/float64 on the CPU), else
  // schedulefree's _foreach calls. Both make its operations in its order, so that float32 agrees;
  // the gradient is left as it is (schedulefree divides it in place).
  void update_group(const std::vector<torch::Tensor>& ys, const std::vector<torch::Tensor>& gs,
                    const std::vector<torch::Tensor>& zs, const std::vector<torch::Tensor>& vs, double lr) const {
    const auto& c = config();
    const auto [beta1, beta2] = c.betas;
    std::vector<torch::Tensor> all(ys);
    for (const auto* more : {&gs, &zs, &vs}) all.insert(all.end(), more->begin(), more->end());
    if (fused::schedule_free_applies(all)) {
      const fused::ScheduleFreeStep s{lr, beta1, beta2, c.eps, c.weight_decay, now_.c, now_.bias_correction2};
      for (size_t j = 0; j < ys.size(); ++j) fused::schedule_free(ys[j], gs[j], zs[j], vs[j], s);
      return;
    }
    torch::_foreach_mul_(vs, beta2);  // v = b2 v + (1 - b2) g^2
    torch::_foreach_addcmul_(vs, gs, gs, 1.0 - beta2);
    auto denom = torch::_foreach_div(vs, now_.bias_correction2);  // sqrt(v / (1 - b2^(k+1))) + eps
    torch::_foreach_sqrt_(denom);
    torch::_foreach_add_(denom, c.eps);
    const auto d = torch::_foreach_div(gs, denom);
    denom.clear();
    if (c.weight_decay != 0.0) torch::_foreach_add_(d, ys, c.weight_decay);  // decay at y
    torch::_foreach_lerp_(ys, zs, now_.c);
    torch::_foreach_add_(ys, d, lr * (beta1 * (1.0 - now_.c) - 1.0));
    torch::_foreach_sub_(zs, d, lr);
  }

  // p = p + w (z - p) for every parameter with state (schedulefree's p.lerp_(z, w)).
  void move(const NamedTensors& params, double w) const {
    for (size_t i = 0; i < params.size(); ++i)
      if (z_[i].defined()) params[i].second.lerp_(z_[i], w);  // under the facade's NoGradGuard
  }

  std::vector<torch::Tensor> z_, exp_avg_sq_;  // parallel to the parameters; undefined until first updated
  int64_t step_ = 0;                           // k: step() calls so far (the facade's steps)
  double weight_sum_ = 0.0;                    // the sum of the weights w so far
  double lr_max_ = -1.0;                       // the largest lr_k so far (schedulefree's start: -1)
  bool at_x_ = false;                          // the parameters are at x (evaluation point), else at y
  Coefficients now_;                           // the step under way's (update_group)
};

}  // namespace

std::unique_ptr<OptimizerAlgorithm> make_adamw_schedulefree(const OptimizerConfig& config, size_t parameters) {
  return std::make_unique<AdamWScheduleFree>(config, parameters);
}

}  // namespace normlab::train
