#include "train/optimizer.h"

#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/problems.h"
#include "train/optimizer_algorithm.h"
#include "train/train_options.h"

namespace normlab::train {
namespace {

constexpr const char* kStepsKey = "steps";

// "sgd", "adam|adamw|radam": the registered optimisers that read `option`.
std::string readers(OptimizerOption option) {
  std::string out;
  for (const auto kind : optimizer_kinds())
    if (optimizer_entry(kind).options & option) out += (out.empty() ? "" : "|") + to_string(kind);
  return out;
}

}  // namespace

std::string to_string(RAdamFallback f) { return radam_fallbacks().name(f); }
std::string to_string(AdamInitV v) { return adam_init_vs().name(v); }
std::string to_string(WeightDecayMode m) { return weight_decay_modes().name(m); }
std::string to_string(MuonAdjustLr a) { return muon_adjust_lrs().name(a); }

RAdamFallback parse_radam_fallback(const std::string& s, const std::string& option) {
  return radam_fallbacks().parse(s, option);
}

AdamInitV parse_adam_init_v(const std::string& s, const std::string& option) {
  return adam_init_vs().parse(s, option);
}

WeightDecayMode parse_weight_decay_mode(const std::string& s, const std::string& option) {
  return weight_decay_modes().parse(s, option);
}

MuonAdjustLr parse_muon_adjust_lr(const std::string& s, const std::string& option) {
  return muon_adjust_lrs().parse(s, option);
}

// Wortsman et al. 2023 (arXiv 2309.14322, "independent weight decay"): theta -= s_t lambda theta
// with s_t the schedule's multiplier lr_t / lr_peak, so that lambda's effect does not change with
// the peak lr; p *= 1 - lr_t (lambda / lr_peak) is that decay in the form p *= 1 - lr c.
double OptimizerConfig::decoupled_weight_decay() const {
  return weight_decay_mode == WeightDecayMode::kIndependent ? weight_decay / peak_lr : weight_decay;
}

std::array<double, 2> parse_betas(const std::string& s, const std::string& option) {
  const auto bad = [&] {
    return std::invalid_argument(option + ": expected two numbers 'b1,b2' (e.g. 0.9,0.98), got '" +
                                 s + "'");
  };
  const auto comma = s.find(',');
  if (comma == std::string::npos || s.find(',', comma + 1) != std::string::npos) throw bad();
  std::array<double, 2> out{};
  const std::string parts[2] = {s.substr(0, comma), s.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    size_t used = 0;
    try {
      out[i] = std::stod(parts[i], &used);
    } catch (const std::exception&) {
      throw bad();
    }
    while (used < parts[i].size() && parts[i][used] == ' ') ++used;
    if (used != parts[i].size()) throw bad();
  }
  return out;
}

// The ranges of single options come from optimizer_options(); here the pair of betas and the
// options that only some optimisers read.
std::vector<std::string> OptimizerConfig::problems() const {
  std::vector<std::string> out = optimizer_options().problems(*this);
  for (double b : betas)
    if (!(b >= 0.0 && b < 1.0)) {
      out.push_back("--betas: each must be in [0, 1), got " + core::format_number(betas[0]) + "," + core::format_number(betas[1]));
      break;
    }
  // Each option beyond betas, eps and weight decay only for the optimisers that read it.
  const unsigned reads = optimizer_entry(kind).options;
  if ((reads & kMomentumOption) && nesterov && !(momentum > 0.0)) out.push_back("--nesterov needs --momentum > 0");
  if (!(reads & kMomentumOption) && (momentum != 0.0 || nesterov))
    out.push_back("--momentum and --nesterov apply to --optimizer " + readers(kMomentumOption) + " only, not " +
                  to_string(kind) +
                  ((reads & kMuonOption) ? " (muon's are --muon-momentum and --muon-nesterov, its AdamW's --betas)"
                                         : " (the Adam family's momentum is --betas)"));
  if (!(reads & kRAdamFallbackOption) && radam_fallback != RAdamFallback::kSkip)
    out.push_back("--radam-fallback applies to --optimizer " + readers(kRAdamFallbackOption) + " only, not " +
                  to_string(kind));
  if (!(reads & kAdamInitVOption) && adam_init_v != AdamInitV::kZero)
    out.push_back("--adam-init-v applies to --optimizer " + readers(kAdamInitVOption) + " only, not " +
                  to_string(kind));
  if (!(reads & kMuonOption)) {
    const OptimizerConfig defaults;
    std::vector<std::string> given;
    if (muon_momentum != defaults.muon_momentum) given.emplace_back("--muon-momentum");
    if (muon_nesterov != defaults.muon_nesterov) given.emplace_back("--muon-nesterov");
    if (muon_ns_steps != defaults.muon_ns_steps) given.emplace_back("--muon-ns-steps");
    if (muon_adjust_lr != defaults.muon_adjust_lr) given.emplace_back("--muon-adjust-lr");
    if (!given.empty()) {
      std::string names;
      for (size_t k = 0; k < given.size(); ++k)
        names += (k == 0 ? "" : k + 1 == given.size() ? " and " : ", ") + given[k];
      out.push_back(names + (given.size() == 1 ? " applies" : " apply") + " to --optimizer " + readers(kMuonOption) +
                    " only, not " + to_string(kind));
    }
  }
  if ((reads & kScheduleFreeOption) && betas[0] == 0.0)
    out.push_back("--betas: --optimizer " + to_string(kind) + " needs beta1 > 0 (its y = (1 - b1) z + b1 x: x is " +
                  "found by dividing by b1), got " + core::format_number(betas[0]) + "," + core::format_number(betas[1]));
  if (!(reads & kScheduleFreeOption)) {
    const OptimizerConfig defaults;
    if (schedule_free_r != defaults.schedule_free_r ||
        schedule_free_weight_lr_power != defaults.schedule_free_weight_lr_power)
      out.push_back("--schedule-free-r and --schedule-free-weight-lr-power apply to --optimizer " +
                    readers(kScheduleFreeOption) + " only, not " + to_string(kind));
  }
  if (weight_decay_mode != WeightDecayMode::kLr) {
    if (!(reads & kWeightDecayModeOption))
      out.push_back("--weight-decay-mode applies to --optimizer " + readers(kWeightDecayModeOption) +
                    " (decoupled weight decay) only, not " + to_string(kind));
    else if (!(peak_lr > 0.0 && std::isfinite(peak_lr)))
      out.push_back("--weight-decay-mode independent divides by the peak --lr, which must be positive, got " +
                    core::format_number(peak_lr));
  }
  return out;
}

void OptimizerConfig::validate() const {
  core::throw_if_problems(problems());
}

Optimizer::Optimizer(NamedTensors params, OptimizerConfig config)
    : params_(std::move(params)), config_(config), lr_scales_(params_.size(), 1.0) {
  config_.validate();
  std::set<std::string> names;
  std::map<const void*, std::string> tensors;  // TensorImpl -> name: is_same() by address
  for (const auto& [name, p] : params_) {
    if (name.empty()) throw std::invalid_argument("optimizer: parameter with an empty name");
    if (!names.insert(name).second)
      throw std::invalid_argument("optimizer: parameter name '" + name + "' given twice");
    if (!p.defined() || !p.is_floating_point())
      throw std::invalid_argument("optimizer: parameter '" + name +
                                  "' is undefined or not floating point");
    const auto [it, fresh] = tensors.emplace(p.unsafeGetTensorImpl(), name);
    if (!fresh)
      throw std::invalid_argument("optimizer: '" + name + "' is the same tensor as '" +
                                  it->second + "' (give shared parameters once)");
  }
  algorithm_ = make_optimizer(config_, params_.size());
}

Optimizer::~Optimizer() = default;
Optimizer::Optimizer(Optimizer&&) noexcept = default;
Optimizer& Optimizer::operator=(Optimizer&&) noexcept = default;

const OptimizerAlgorithm& Optimizer::algorithm() const { return *algorithm_; }

void Optimizer::set_lr_scales(std::vector<double> scales) {
  if (scales.size() != params_.size())
    throw std::invalid_argument("optimizer: " + std::to_string(scales.size()) + " lr scales for " +
                                std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < scales.size(); ++i)
    if (!(scales[i] >= 0.0 && std::isfinite(scales[i])))
      throw std::invalid_argument("optimizer: the lr scale of '" + params_[i].first + "' must be finite and >= 0, got " +
                                  core::format_number(scales[i]));
  lr_scales_ = std::move(scales);
}

void Optimizer::set_weight_decay_scales(std::vector<double> scales) {
  if (scales.size() != params_.size())
    throw std::invalid_argument("optimizer: " + std::to_string(scales.size()) + " weight decay scales for " +
                                std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < scales.size(); ++i) {
    if (!(scales[i] >= 0.0 && std::isfinite(scales[i])))
      throw std::invalid_argument("optimizer: the weight decay scale of '" + params_[i].first +
                                  "' must be finite and >= 0, got " + core::format_number(scales[i]));
    if (scales[i] != 1.0 && !algorithm_->scales_weight_decay())
      throw std::invalid_argument("optimizer: --optimizer " + to_string(config_.kind) +
                                  " has no per-parameter weight decay");
  }
  algorithm_->set_weight_decay_scales(std::move(scales));
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.mutable_grad() = torch::Tensor();
}

void Optimizer::step(double lr, bool record_updates) {
  if (!(lr >= 0.0 && std::isfinite(lr)))
    throw std::invalid_argument("optimizer: learning rate must be finite and >= 0, got " + core::format_number(lr));
  if (at_evaluation_point())
    throw std::logic_error("optimizer: step() with the parameters at the evaluation point (to_training_point() first)");
  torch::NoGradGuard no_grad;
  last_updates_.clear();
  std::vector<size_t> ready;  // the parameters with a gradient
  std::vector<torch::Tensor> before;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].second.grad().defined()) continue;
    ready.push_back(i);
    if (record_updates) before.push_back(params_[i].second.clone());
  }
  algorithm_->step(params_, ready, lr_scales_, lr);
  for (size_t k = 0; k < before.size(); ++k) last_updates_[params_[ready[k]].first] = params_[ready[k]].second - before[k];
  ++steps_;
}

void Optimizer::to_evaluation_point() {
  torch::NoGradGuard no_grad;
  algorithm_->to_evaluation_point(params_);
}

void Optimizer::to_training_point() {
  torch::NoGradGuard no_grad;
  algorithm_->to_training_point(params_);
}

bool Optimizer::at_evaluation_point() const { return algorithm_->at_evaluation_point(); }

AtEvaluationPoint::AtEvaluationPoint(Optimizer& optimizer)
    : optimizer_(optimizer), was_there_(optimizer.at_evaluation_point()) {
  optimizer_.to_evaluation_point();
}

AtEvaluationPoint::~AtEvaluationPoint() {
  if (!was_there_) optimizer_.to_training_point();
}

TensorMap Optimizer::state() const {
  TensorMap out;
  out[kStepsKey] = torch::tensor(steps_, torch::kInt64);
  algorithm_->save_state(params_, out);
  return out;
}

// Into a fresh optimiser, so that a refused state leaves this one as it was.
void Optimizer::load_state(const TensorMap& state) {
  torch::NoGradGuard no_grad;
  StateReader in(state, params_);
  const auto steps = in.count(kStepsKey);
  if (!steps) throw state_error("no '" + std::string(kStepsKey) + "' entry");
  auto loaded = make_optimizer(config_, params_.size());
  loaded->load_state(in);
  in.refuse_unread(to_string(config_.kind));
  steps_ = *steps;
  algorithm_ = std::move(loaded);
  last_updates_.clear();
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;
  const auto first_device = grads.front().device();
  std::vector<torch::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& g : grads) norms.push_back(torch::linalg_vector_norm(g, 2).to(first_device));
  const auto total = torch::linalg_vector_norm(torch::stack(norms), 2);
  if (max_norm > 0.0) {
    // As torch: max_norm / (total + 1e-6) is evaluated as reciprocal * max_norm, then clamped;
    // multiplying by a coefficient of exactly 1 changes nothing.
    const auto coef = ((total + 1e-6).reciprocal() * max_norm).clamp_max(1.0);
    for (auto& g : grads) g.mul_(coef.to(g.device()));
  }
  return total.item<double>();
}

double clip_grad_norm(const NamedTensors& params, double max_norm) {
  std::vector<torch::Tensor> tensors;
  tensors.reserve(params.size());
  for (const auto& [name, p] : params) tensors.push_back(p);
  return clip_grad_norm(tensors, max_norm);
}

void to_json(nlohmann::json& j, const OptimizerConfig& c) { j = optimizer_options().to_json(c); }

void from_json(const nlohmann::json& j, OptimizerConfig& c) {
  c.kind = parse_optimizer_kind(j.at("optimizer").get<std::string>(), "optimizer");
  const auto& b = j.at("betas");
  if (!b.is_array() || b.size() != 2) throw std::invalid_argument("betas: expected [b1, b2]");
  b.at(0).get_to(c.betas[0]);
  b.at(1).get_to(c.betas[1]);
  j.at("eps").get_to(c.eps);
  j.at("weight_decay").get_to(c.weight_decay);
  j.at("momentum").get_to(c.momentum);
  j.at("nesterov").get_to(c.nesterov);
  c.radam_fallback = parse_radam_fallback(j.at("radam_fallback").get<std::string>(),
                                          "radam_fallback");
  c.adam_init_v = parse_adam_init_v(j.value("adam_init_v", std::string("zero")), "adam_init_v");  // older runs: zero
  c.weight_decay_mode =
      parse_weight_decay_mode(j.value("weight_decay_mode", std::string("lr")), "weight_decay_mode");  // older runs: lr
  // Runs from before --optimizer muon: its defaults.
  const OptimizerConfig defaults;
  c.muon_momentum = j.value("muon_momentum", defaults.muon_momentum);
  c.muon_nesterov = j.value("muon_nesterov", defaults.muon_nesterov);
  c.muon_ns_steps = j.value("muon_ns_steps", defaults.muon_ns_steps);
  c.muon_adjust_lr = j.contains("muon_adjust_lr")
                         ? parse_muon_adjust_lr(j.at("muon_adjust_lr").get<std::string>(), "muon_adjust_lr")
                         : defaults.muon_adjust_lr;
  // Runs from before --optimizer adamw-schedulefree: its defaults.
  c.schedule_free_r = j.value("schedule_free_r", defaults.schedule_free_r);
  c.schedule_free_weight_lr_power = j.value("schedule_free_weight_lr_power", defaults.schedule_free_weight_lr_power);
}

}  // namespace normlab::train
