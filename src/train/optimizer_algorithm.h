// What an optimiser is to normlab (docs/optimisers.md, "Adding an optimiser"): a class that
// answers for its update, its per-parameter state, its diagonal preconditioner and its
// stability threshold, registered by its --optimizer name. The facade `Optimizer`
// (optimizer.h) checks the parameters, counts steps, scales lr and records updates around it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/types.h>

#include "train/optimizer.h"
#include "train/instrument_config.h"

namespace normlab::train {

// Reads one optimiser's entries out of a saved state (TensorMap) and checks each; what no read
// asked for is refused by Optimizer::load_state (another optimiser's state, or unknown).
class StateReader {
 public:
  StateReader(const TensorMap& state, const NamedTensors& params);
  // "<prefix>.<name of parameter i>", copied to the parameter's device and dtype, contiguous;
  // undefined when absent. Throws std::runtime_error when its shape is not the parameter's.
  torch::Tensor tensor(const char* prefix, size_t i);
  // "<prefix>.<name of parameter i>" as a count >= 0; nullopt when absent.
  std::optional<int64_t> count(const char* prefix, size_t i);
  // The entry `key` as a count >= 0; nullopt when absent. Throws unless one integer >= 0.
  std::optional<int64_t> count(const std::string& key);
  // The entry `key` as a number, exactly as saved (float64); nullopt when absent. Throws unless
  // one floating-point number.
  std::optional<double> number(const std::string& key);
  const NamedTensors& parameters() const { return params_; }
  // Throws std::runtime_error for the first entry no read asked for, naming it and `optimizer`.
  void refuse_unread(const std::string& optimizer) const;

 private:
  const TensorMap& state_;
  const NamedTensors& params_;
  std::set<std::string> read_;  // the keys asked for and found
};
// "optimizer state: <message>", the error of every state check.
std::runtime_error state_error(const std::string& message);
// The key of a per-parameter entry, "<prefix>.<parameter name>" (docs/optimisers.md).
std::string state_key(const char* prefix, const std::string& name);

// One optimiser. It keeps the state of each parameter (indexed as the facade's parameters()),
// and is given the parameters on every call; the facade runs step() and load_state() under NoGradGuard.
class OptimizerAlgorithm {
 public:
  explicit OptimizerAlgorithm(const OptimizerConfig& config) : config_(config) {}
  virtual ~OptimizerAlgorithm() = default;

  // (b) One update of every parameter i in `ready` (those with a gradient), at rate
  // lr * lr_scales[i]. By default update() for each in turn.
  virtual void step(const NamedTensors& params, const std::vector<size_t>& ready,
                    const std::vector<double>& lr_scales, double lr);
  // (a) Copies of the per-parameter state under its keys (state_key), on the parameters'
  // devices, added to `out`; and their replacement from a saved state, where each must be
  // found and checked. Default: no state.
  virtual void save_state(const NamedTensors& params, TensorMap& out) const;
  virtual void load_state(StateReader& in);
  // (d) The largest curvature at which a step of rate lr > 0 is stable on a quadratic, of
  // P^-1 H when preconditioned(), else of H (Cohen et al. 2021, 2022; REFERENCE §9). nullopt
  // (at every lr) when none is known: curvature (analysis/curvature.h) then refuses the optimiser.
  virtual std::optional<double> stability_threshold(double lr) const = 0;
  // (c) Whether the threshold is for lambda_1(P^-1 H) with the diagonal P of preconditioner();
  // false: plain sharpness lambda_1(H) (P = identity).
  virtual bool preconditioned() const { return false; }
  // out (n_i): P of parameter i, flattened, `kind` as train::Preconditioner says; `gradient`
  // (n_i, out's dtype) the probe set's gradient of parameter i, given for kNext only.
  virtual void preconditioner(torch::Tensor out, size_t i, Preconditioner kind, const torch::Tensor& gradient) const;
  // (e) Where the model is evaluated, when that is not where its gradients are taken:
  // schedule-free's average x against its y (Defazio et al. 2024). The parameters move there and
  // back in place (each call: nothing when already there); step() runs at the training point, and
  // save_state records the point. Default: one point for both, nothing moves.
  virtual void to_evaluation_point(const NamedTensors& /*params*/) {}
  virtual void to_training_point(const NamedTensors& /*params*/) {}
  virtual bool at_evaluation_point() const { return false; }

  const OptimizerConfig& config() const { return config_; }

  // (f) Per-parameter multipliers of --weight-decay, parallel to the parameters (muP's: the
  // `mup` package rescales each parameter group's weight_decay beside its lr, train/width_lr.h);
  // empty: all 1. Only an optimiser whose scales_weight_decay() is true reads them (the facade
  // refuses others any multiplier but 1).
  void set_weight_decay_scales(std::vector<double> scales) { weight_decay_scales_ = std::move(scales); }
  virtual bool scales_weight_decay() const { return false; }

 protected:
  // One parameter p (its state: index i) from `grad` at its rate lr (lr scale included).
  virtual void update(const torch::Tensor& p, const torch::Tensor& grad, size_t i, double lr) = 0;
  // Parameter i's multiplier of the weight decay (set_weight_decay_scales).
  double weight_decay_scale(size_t i) const { return weight_decay_scales_.empty() ? 1.0 : weight_decay_scales_[i]; }

 private:
  const OptimizerConfig config_;
  std::vector<double> weight_decay_scales_;
};

// Options beyond --betas, --eps and --weight-decay that an optimiser reads; problems() refuses
// the others when set (OptimizerEntry::options, a bitwise or).
enum OptimizerOption : unsigned {
  kNoOptions = 0,
  kMomentumOption = 1,       // --momentum, --nesterov
  kRAdamFallbackOption = 2,  // --radam-fallback
  kAdamInitVOption = 4,      // --adam-init-v
  kWeightDecayModeOption = 8,  // --weight-decay-mode (decoupled weight decay through decoupled_weight_decay())
  kMuonOption = 16,          // --muon-momentum, --muon-nesterov, --muon-ns-steps, --muon-adjust-lr
  // It warms up itself over --warmup-steps (OptimizerConfig::warmup_steps) and replaces the
  // schedule: --lr-schedule must be constant, whose ramp the trainer then leaves out
  // (TrainConfig::rate_schedule).
  kOwnWarmupOption = 32,
  kScheduleFreeOption = 64,  // --schedule-free-r, --schedule-free-weight-lr-power
};

// An optimiser as the registry knows it: its --optimizer name, how to make it for a config
// and a number of parameters, the options it reads, and its --betas where the command line
// gives none (`normlab train` applies them; OptimizerConfig's own default is 0.9,0.98).
struct OptimizerEntry {
  std::string name;
  std::unique_ptr<OptimizerAlgorithm> (*make)(const OptimizerConfig& config, size_t parameters);
  unsigned options = kNoOptions;
  std::array<double, 2> betas{0.9, 0.98};
};
// The entry of `kind`.
const OptimizerEntry& optimizer_entry(OptimizerKind kind);
// Adds an optimiser beside the built-in ones (optimizer_registry.cpp holds their table), e.g. a
// test's; returns its kind. Throws std::invalid_argument for an empty or taken name.
OptimizerKind register_optimizer(OptimizerEntry entry);
// The registered optimiser of config.kind for `parameters` parameters (none: only to ask for
// its preconditioner and threshold).
std::unique_ptr<OptimizerAlgorithm> make_optimizer(const OptimizerConfig& config, size_t parameters = 0);

}  // namespace normlab::train
