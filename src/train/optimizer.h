// normlab's optimisers (docs/optimisers.md): SGD, Adam, AdamW as PyTorch defines them, RAdam
// as its authors' code does (REFERENCE §1), Lion as lion-pytorch does and Muon as torch.optim.Muon
// does, with AdamW for what Muon does not update, schedule-free AdamW as schedulefree does
// (REFERENCE §11). Our
// own, not torch::optim, so that the state is ours to save bit-exactly and the update of each
// step can be recorded on request. Each is a class registered by its --optimizer name
// (optimizer_algorithm.h); `Optimizer` is the facade.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

namespace normlab::train {

// An optimiser's --optimizer name, one of the registry's (optimizer_algorithm.h): the built-in
// ones as constants, any other from parse_optimizer_kind.
class OptimizerKind {
 public:
  static const OptimizerKind kSgd;    // torch.optim.SGD: momentum, dampening 0, optional Nesterov, L2 weight decay
  static const OptimizerKind kAdam;   // torch.optim.Adam: L2 weight decay added to the gradient
  static const OptimizerKind kAdamW;  // torch.optim.AdamW: decoupled weight decay p -= lr*wd*p (fairseq's "adam")
  static const OptimizerKind kRAdam;  // Liu et al. 2020, authors' code: rectified Adam, decoupled weight decay
  static const OptimizerKind kLion;   // Chen et al. 2023: sign of an interpolated momentum, decoupled weight decay
  static const OptimizerKind kMuon;   // Jordan et al. 2024, Liu et al. 2025: orthogonalised momentum for the 2-D
                                      // hidden weights, AdamW for the rest (optimizers/muon.h says which)
  static const OptimizerKind kAdamWScheduleFree;  // Defazio et al. 2024: AdamW without a schedule, gradients
                                                  // at y, the model evaluated at the average x (schedulefree)

  std::string_view name() const { return name_; }
  friend bool operator==(OptimizerKind a, OptimizerKind b) { return a.name_ == b.name_; }
  friend bool operator!=(OptimizerKind a, OptimizerKind b) { return a.name_ != b.name_; }

 private:
  // `name` outlives the kind: a literal, or the registry's copy (entries are never removed).
  constexpr explicit OptimizerKind(std::string_view name) : name_(name) {}
  friend OptimizerKind parse_optimizer_kind(const std::string& s, const std::string& option);
  friend std::vector<OptimizerKind> optimizer_kinds();
  std::string_view name_;
};
inline constexpr OptimizerKind OptimizerKind::kSgd{"sgd"};
inline constexpr OptimizerKind OptimizerKind::kAdam{"adam"};
inline constexpr OptimizerKind OptimizerKind::kAdamW{"adamw"};
inline constexpr OptimizerKind OptimizerKind::kRAdam{"radam"};
inline constexpr OptimizerKind OptimizerKind::kLion{"lion"};
inline constexpr OptimizerKind OptimizerKind::kMuon{"muon"};
inline constexpr OptimizerKind OptimizerKind::kAdamWScheduleFree{"adamw-schedulefree"};

// RAdam's update while the variance is not yet rectifiable (rho_t < 5, REFERENCE §1).
enum class RAdamFallback {
  kSkip,  // no update at all (and no weight decay): the authors' current default
  kSgd,   // SGD with momentum: p -= lr / (1 - beta1^t) * m (authors' degenerated_to_sgd)
};
// The Adam family's second moment before the first update (REFERENCE §9).
enum class AdamInitV {
  kZero,         // v_0 = 0: torch.optim, fairseq
  kGradSquared,  // v_0 = g_0^2, the first gradient squared, bias correction kept: GI-Adam
                 // (Kalra & Barkeshli 2024)
};
// What a decoupled weight decay (adamw, lion) multiplies: p *= 1 - s wd at each step.
enum class WeightDecayMode {
  kLr,           // s = lr_t, the step's rate: torch.optim.AdamW, fairseq, lion-pytorch
  kIndependent,  // s = lr_t / lr_peak, the schedule's multiplier alone: Wortsman et al. 2023's
                 // "independent" decay (Loshchilov & Hutter's Algorithm 2, eta_t lambda theta)
};
// How muon scales the orthogonalised update O of an A x B matrix: p -= lr s O (torch.optim.Muon's
// adjust_lr_fn).
enum class MuonAdjustLr {
  kOriginal,       // s = sqrt(max(1, A/B)): Jordan et al. 2024, torch's default ("original")
  kMatchRmsAdamW,  // s = 0.2 sqrt(max(A, B)): Liu et al. 2025 (Moonlight), the update RMS of AdamW's
                   // (~0.2), so that one --lr and --weight-decay serve Muon and its AdamW ("match_rms_adamw")
};
std::string to_string(OptimizerKind k);
std::string to_string(RAdamFallback f);
std::string to_string(AdamInitV v);
std::string to_string(WeightDecayMode m);
std::string to_string(MuonAdjustLr a);
// The registered optimisers in the order of registration, and their names
// "sgd|adam|adamw|radam|lion|muon|adamw-schedulefree".
std::vector<OptimizerKind> optimizer_kinds();
std::string optimizer_choices();
// The --betas of `kind` where the command line gives none (`normlab train` applies it): its
// registry entry's, 0.9,0.99 for lion (Chen et al. 2023, lion-pytorch), 0.9,0.95 for muon's AdamW
// (Jordan et al.'s and Moonlight's), 0.9,0.999 for adamw-schedulefree (schedulefree's), else 0.9,0.98.
std::array<double, 2> default_betas(OptimizerKind kind);
// Whether `kind` warms up itself and replaces the learning-rate schedule (its registry entry's
// kOwnWarmupOption: adamw-schedulefree): --lr-schedule constant, whose warm-up it takes over.
bool replaces_schedule(OptimizerKind kind);
// Parsers throw std::invalid_argument naming `option`, the value and the choices.
OptimizerKind parse_optimizer_kind(const std::string& s, const std::string& option = "--optimizer");
RAdamFallback parse_radam_fallback(const std::string& s,
                                   const std::string& option = "--radam-fallback");
AdamInitV parse_adam_init_v(const std::string& s, const std::string& option = "--adam-init-v");
WeightDecayMode parse_weight_decay_mode(const std::string& s, const std::string& option = "--weight-decay-mode");
MuonAdjustLr parse_muon_adjust_lr(const std::string& s, const std::string& option = "--muon-adjust-lr");
// "0.9,0.98" -> {0.9, 0.98}.
std::array<double, 2> parse_betas(const std::string& s, const std::string& option = "--betas");

// The learning rate is not here: Optimizer::step takes the scheduled rate (schedule.h).
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdamW;  // --optimizer; adamw is what fairseq's adam does
  std::array<double, 2> betas{0.9, 0.98};      // --betas b1,b2 (Vaswani 2017, REFERENCE §2; without
                                               // --betas lion's registry entry's 0.9,0.99, muon's 0.9,0.95)
  double eps = 1e-8;                           // --eps, added to sqrt(v) (all Adam variants)
  double weight_decay = 0.0;                   // --weight-decay (IWSLT recipe: 1e-4)
  double momentum = 0.0;                       // --momentum, sgd only
  bool nesterov = false;                       // --nesterov, sgd only, needs momentum > 0
  RAdamFallback radam_fallback = RAdamFallback::kSkip;  // --radam-fallback skip|sgd
  AdamInitV adam_init_v = AdamInitV::kZero;             // --adam-init-v zero|grad-squared
  WeightDecayMode weight_decay_mode = WeightDecayMode::kLr;  // --weight-decay-mode lr|independent
  // Muon's own (muon only; its AdamW part reads --betas, --eps and --weight-decay):
  double muon_momentum = 0.95;   // --muon-momentum mu, in [0, 1): B = mu B + (1 - mu) g (torch's default)
  bool muon_nesterov = true;     // --muon-nesterov (=false: off): O from (1 - mu) g + mu B, else from B
  int64_t muon_ns_steps = 5;     // --muon-ns-steps: Newton-Schulz iterations (Jordan et al.'s, torch's 5)
  MuonAdjustLr muon_adjust_lr = MuonAdjustLr::kMatchRmsAdamW;  // --muon-adjust-lr original|match-rms-adamw
  // Schedule-free AdamW's own (adamw-schedulefree only): the weight (k+1)^r lr_max^p of update k+1
  // in the average x (schedulefree's r and weight_lr_power).
  double schedule_free_r = 0.0;                // --schedule-free-r r >= 0 (0: every update alike)
  double schedule_free_weight_lr_power = 2.0;  // --schedule-free-weight-lr-power p >= 0
  // lr_peak of --weight-decay-mode independent: the schedule's --lr, copied by the command (as the
  // schedule's max_steps from --max-steps); not an option, not in config.json.
  double peak_lr = 0.0;
  // W of an optimiser that warms up itself (kOwnWarmupOption; adamw-schedulefree: rate
  // lr min(1, (k+1)/W) at update k+1), the schedule's --warmup-steps copied by the command as
  // peak_lr is; not an option, not in config.json (the schedule's warmup_steps is).
  int64_t warmup_steps = 0;

  // The c of a decoupled weight decay p *= 1 - lr c at a step of rate lr (lr scale included):
  // weight_decay, or weight_decay / peak_lr with --weight-decay-mode independent.
  double decoupled_weight_decay() const;

  // Every problem at once, one message each naming the option (empty when valid).
  std::vector<std::string> problems() const;
  // Throws std::invalid_argument joining problems() when there are any.
  void validate() const;
};

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
using TensorMap = std::map<std::string, torch::Tensor>;

class OptimizerAlgorithm;

// The facade over the registered optimiser of config.kind: it checks the parameters, counts the
// steps, applies lr scales and records updates; the optimiser updates and keeps its state.
class Optimizer {
 public:
  // Parameters by unique name, each a distinct floating-point tensor (shared tables once),
  // updated in place on their own devices. Throws std::invalid_argument on config problems,
  // empty/duplicate names, undefined, non-floating or repeated tensors.
  Optimizer(NamedTensors params, OptimizerConfig config);
  ~Optimizer();
  Optimizer(Optimizer&&) noexcept;
  Optimizer& operator=(Optimizer&&) noexcept;

  // One update at rate lr from each parameter's .grad(); parameters without a gradient are
  // skipped, their state untouched (as torch.optim does). With record_updates, last_updates()
  // then holds p_new - p_old for every parameter that had a gradient; without, nothing is
  // copied and last_updates() is empty. Throws std::invalid_argument for a negative or
  // non-finite lr, std::logic_error at the evaluation point.
  void step(double lr, bool record_updates = false);
  // The point where the model is evaluated (validation, test, checkpoints, the final model) and
  // the one where step() takes its gradients: the same but for adamw-schedulefree, whose
  // parameters are its average x at the first and y at the second (Defazio et al. 2024;
  // schedulefree's optimizer.eval() and .train()). Each moves the parameters in place, and
  // nothing when they are there already; a new optimiser is at the training point. state()
  // records the point, load_state() takes it (the trainer saves at the evaluation point).
  void to_evaluation_point();
  void to_training_point();
  bool at_evaluation_point() const;
  // Per-parameter multipliers of lr, parallel to parameters() (torch.optim's parameter
  // groups with their own lr; decoupled weight decay scales with it, as there). Default all 1;
  // 0 keeps a parameter exactly where it is. Throws std::invalid_argument for a wrong size or
  // a negative or non-finite multiplier. Not part of state(): it comes from the configuration.
  void set_lr_scales(std::vector<double> scales);
  // Per-parameter multipliers of --weight-decay, parallel to parameters() (torch.optim's
  // parameter groups with their own weight_decay: muP's, train/width_lr.h). Default all 1. Throws
  // std::invalid_argument for a wrong size, a negative or non-finite multiplier, or one other
  // than 1 for an optimiser that has no per-parameter weight decay (adam, adamw and sgd have).
  void set_weight_decay_scales(std::vector<double> scales);
  // Number of step() calls so far (including those that skipped every parameter).
  int64_t steps() const { return steps_; }
  const TensorMap& last_updates() const { return last_updates_; }
  // Sets every parameter's gradient to undefined (torch's zero_grad(set_to_none=True)).
  void zero_grad();

  // Copies of the state: "steps" (int64 scalar), and per parameter that has state
  // "step.<name>" (int64 scalar, Adam family), "exp_avg.<name>", "exp_avg_sq.<name>",
  // "momentum_buffer.<name>" (sgd with momentum, muon's matrices). On the parameters' devices.
  TensorMap state() const;
  // Replaces the whole state; the next step() continues bit-exactly. Tensors are copied to
  // each parameter's device and dtype. Throws std::runtime_error naming the key for unknown
  // names, another optimiser's entries, missing companions, wrong shapes or a missing "steps".
  void load_state(const TensorMap& state);

  const NamedTensors& parameters() const { return params_; }
  const OptimizerConfig& config() const { return config_; }
  // The registered optimiser: its preconditioner and stability threshold (analysis/curvature.h).
  const OptimizerAlgorithm& algorithm() const;

 private:
  NamedTensors params_;
  OptimizerConfig config_;
  std::unique_ptr<OptimizerAlgorithm> algorithm_;  // holds the per-parameter state
  std::vector<double> lr_scales_;  // parallel to params_ (set_lr_scales)
  int64_t steps_ = 0;
  TensorMap last_updates_;
};

// Holds the parameters at the optimiser's evaluation point while it lives, then puts them back
// where they were (the training point, unless they were at the evaluation point already).
class AtEvaluationPoint {
 public:
  explicit AtEvaluationPoint(Optimizer& optimizer);
  ~AtEvaluationPoint();
  AtEvaluationPoint(const AtEvaluationPoint&) = delete;
  AtEvaluationPoint& operator=(const AtEvaluationPoint&) = delete;

 private:
  Optimizer& optimizer_;
  const bool was_there_;
};

// torch.nn.utils.clip_grad_norm_: the 2-norm of all gradients together (parameters without a
// gradient skipped) before clipping; when max_norm > 0 every gradient is multiplied by
// min(1, max_norm / (norm + 1e-6)). max_norm <= 0 only measures (fairseq's --clip-norm 0).
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);
double clip_grad_norm(const NamedTensors& params, double max_norm);

void to_json(nlohmann::json& j, const OptimizerConfig& c);
void from_json(const nlohmann::json& j, OptimizerConfig& c);

}  // namespace normlab::train
