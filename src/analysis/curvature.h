// Curvature during training (REFERENCE §9; docs/curvature.md): the sharpness lambda_1(H) of the
// training loss on a fixed probe set and, for the Adam family, the preconditioned sharpness
// lambda_1(P^-1 H), each against the stability threshold of the step about to be taken.
// RUN_DIR/curvature.jsonl, one record per measurement:
//   step, lr (of the next update), lambda_max, sgd_threshold (2/lr, (2+2 beta)/lr with
//   momentum), and for the Adam family preconditioned_lambda_max, adam_threshold
//   ((2+2 beta1)/((1-beta1) lr)), and with --curvature-preconditioner cohen bias_correction1
//   (1 - beta1^t); threshold and ratio for the quantity that applies; hvps, seconds.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "analysis/hvp.h"
#include "analysis/lanczos.h"
#include "core/process_group.h"
#include "train/optimizer.h"
#include "train/callback.h"
#include "train/instrument_config.h"

namespace normlab::analysis {

// Each optimiser answers for its preconditioner and threshold (train/optimizer_algorithm.h).
// Why curvature cannot judge `optimizer` (it declares no stability threshold), or nullopt: one
// line naming it. The functions below throw it as std::invalid_argument.
std::optional<std::string> curvature_problem(const train::OptimizerConfig& optimizer);
// Whether the optimiser's quantity is the preconditioned sharpness (the Adam family).
bool preconditioned(const train::OptimizerConfig& optimizer);
// The threshold above which the next step is unstable on a quadratic of that curvature: 2/lr
// (gradient descent), (2 + 2 beta)/lr (heavy-ball momentum beta), (2 + 2 beta1)/((1 - beta1) lr)
// for the Adam family's preconditioned sharpness (Cohen et al. 2022). Infinite at lr = 0.
double stability_threshold(const train::OptimizerConfig& optimizer, double lr);

// P's diagonal (n), in `hessian`'s vector layout, from each parameter's optimiser state (matched
// by name), for a preconditioned optimiser. The Adam family's: kCurrent from v_t, kCohen the
// same times 1 - beta1^t, kNext from v_{t+1} = beta2 v_t + (1 - beta2) g^2 with `gradient` (n)
// the probe set's (v_1 = g^2 for GI-Adam's first step). A parameter without state has v_t = 0.
torch::Tensor adam_preconditioner(const train::Optimizer& optimizer, const FullDataHessian& hessian,
                                  train::Preconditioner kind, const torch::Tensor& gradient);

// lambda_1(P^-1 H) with its Ritz vector (in P^1/2's coordinates: a warm start for the next
// call), P the `kind` preconditioner of the Adam-family `optimizer` (kNext: from the probe set's
// gradient), by `steps` Lanczos steps on P^-1/2 H P^-1/2 from `start`; `hvp` is H's product.
TopRitz preconditioned_sharpness(const FullDataHessian& hessian, const LinearOperator& hvp,
                                 const train::Optimizer& optimizer, train::Preconditioner kind,
                                 const torch::Tensor& start, int64_t steps);

// While it lives, `net` computes in fp32 (HVPs in fp32: REFERENCE §7); its precision and its
// training mode (FullDataHessian puts it in eval mode) come back at the end of the scope.
class Fp32Measurement {
 public:
  explicit Fp32Measurement(model::Model net)
      : net_(std::move(net)), precision_(net_->precision()), training_(net_->is_training()) {
    net_->set_precision(model::Precision::kFp32);
  }
  ~Fp32Measurement() {
    net_->set_precision(precision_);
    net_->train(training_);
  }
  Fp32Measurement(const Fp32Measurement&) = delete;
  Fp32Measurement& operator=(const Fp32Measurement&) = delete;

 private:
  model::Model net_;
  model::Precision precision_;
  bool training_;
};

// A training run's probe set: its first `sentences` validation pairs, batched as validation
// batches them (the same on every rank and after a resume).
std::vector<data::Batch> probe_batches(const train::RunContext& run, int64_t sentences);

// Whether a measurement on this probe set keeps its first-order graphs for its Lanczos products
// (FullDataHessian's keep_graphs: the same products bit for bit, each after the first about 2.1
// gradients instead of 3.1; docs/performance.md): when the set is one batch, whose graph every
// product builds anyway, so that the peak memory grows by about one graph and not with the set.
bool keep_probe_graphs(const std::vector<data::Batch>& probe);

// lambda_1 of `op` by `steps` Lanczos steps from `start` (n), with its Ritz vector.
TopRitz largest_eigenvalue(const LinearOperator& op, const torch::Tensor& start, int64_t steps);

// `flat` (n) in `hessian`'s layout as one view per parameter, shaped like it.
std::vector<torch::Tensor> parameter_views(const FullDataHessian& hessian, const torch::Tensor& flat);

// lambda_1(P^-1 H) before the first step of the Adam-family `optimizer` (fresh state): P of that
// step (kNext, from `gradient`, the probe set's), by `steps` Lanczos steps on P^-1/2 H P^-1/2
// from `start`.
double first_step_preconditioned_sharpness(const FullDataHessian& hessian, const train::OptimizerConfig& optimizer,
                                           const torch::Tensor& gradient, const torch::Tensor& start,
                                           int64_t steps);

// The critical learning rate (Kalra & Barkeshli 2024, REFERENCE §9): the smallest lr in
// [lo, hi] whose first step of `optimizer` (fresh state) from `params`, with the gradients
// `grads` (parallel to params), increases `loss()` (a NaN counts as an increase); by bisection
// on log(lr) until hi/lo <= 1 + tol, each trial restoring the parameters. Bisection finds a
// crossing of the bracket: the smallest one when the increase is monotone in lr (as on a quadratic).
struct CriticalLr {
  double lr = 0.0;          // the upper end of the final bracket (an lr that increases the loss)
  bool bracketed = false;   // lo does not increase the loss and hi does; else lr is lo or NaN
  int64_t evaluations = 0;  // loss() calls, the first included
};
CriticalLr critical_lr(const train::NamedTensors& params, const std::vector<torch::Tensor>& grads,
                       const train::OptimizerConfig& optimizer, const std::function<double()>& loss, double lo,
                       double hi, double tol);

// Sharpness and preconditioned sharpness on a fixed probe set during training (--curvature-every).
class CurvatureSeries final {
 public:
  // `probe`: the probe set's batches; `file`: RUN_DIR/curvature.jsonl, whose records after
  // `done_updates` are dropped (a resumed run writes them again); only `writes` writes it.
  // Throws std::invalid_argument (curvature_problem) for an optimiser without a threshold.
  CurvatureSeries(const train::CurvatureConfig& config, const train::OptimizerConfig& optimizer, model::Model net,
                  std::vector<data::Batch> probe, const train::LossOptions& loss, const torch::Device& device,
                  std::string file, int64_t done_updates, bool writes, core::ProcessGroup group);
  void measure(int64_t update, double next_lr, const train::Optimizer& optimizer);
  std::map<std::string, torch::Tensor> state() const;
  void load_state(const std::map<std::string, torch::Tensor>& state);

 private:
  train::CurvatureConfig config_;
  model::Model net_;
  std::vector<data::Batch> probe_;
  train::LossOptions loss_;
  torch::Device device_;
  std::string file_;
  bool writes_;
  core::ProcessGroup group_;
  torch::Tensor sharpness_start_, preconditioned_start_;  // last top Ritz vectors (warm starts)
};

// --curvature-every as a training callback (train/callback.h): the probe set is the first
// config.sentences validation pairs, batched as validation batches them; measured at update 0
// and after every config.every-th update into RUN_DIR/curvature.jsonl. Nothing when every is 0.
std::unique_ptr<train::TrainCallback> curvature_callback(const train::CurvatureConfig& config,
                                                          const train::OptimizerConfig& optimizer,
                                                          const train::LossOptions& loss);

}  // namespace normlab::analysis
