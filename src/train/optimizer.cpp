#include "train/optimizer.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/problems.h"

namespace normlab::train {
namespace {

constexpr const char* kStepsKey = "steps";
// Per-parameter state, "<prefix>.<parameter name>".
constexpr const char* kStep = "step";
constexpr const char* kExpAvg = "exp_avg";
constexpr const char* kExpAvgSq = "exp_avg_sq";
constexpr const char* kMomentum = "momentum_buffer";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

bool adam_family(OptimizerKind k) { return k != OptimizerKind::kSgd; }

torch::Tensor int_scalar(int64_t v) { return torch::tensor(v, torch::kInt64); }

}  // namespace

std::string to_string(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kRAdam: return "radam";
  }
  throw std::logic_error("unnamed OptimizerKind");
}

std::string to_string(RAdamFallback f) { return f == RAdamFallback::kSkip ? "skip" : "sgd"; }
std::string to_string(AdamInitV v) { return v == AdamInitV::kZero ? "zero" : "grad-squared"; }

OptimizerKind parse_optimizer_kind(const std::string& s, const std::string& option) {
  for (auto k : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW,
                 OptimizerKind::kRAdam})
    if (s == to_string(k)) return k;
  throw std::invalid_argument(option + ": unknown value '" + s + "', expected sgd|adam|adamw|radam");
}

RAdamFallback parse_radam_fallback(const std::string& s, const std::string& option) {
  if (s == "skip") return RAdamFallback::kSkip;
  if (s == "sgd") return RAdamFallback::kSgd;
  throw std::invalid_argument(option + ": unknown value '" + s + "', expected skip|sgd");
}

AdamInitV parse_adam_init_v(const std::string& s, const std::string& option) {
  if (s == "zero") return AdamInitV::kZero;
  if (s == "grad-squared") return AdamInitV::kGradSquared;
  throw std::invalid_argument(option + ": unknown value '" + s + "', expected zero|grad-squared");
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

std::vector<std::string> OptimizerConfig::problems() const {
  std::vector<std::string> out;
  for (double b : betas)
    if (!(b >= 0.0 && b < 1.0)) {
      out.push_back("--betas: each must be in [0, 1), got " + num(betas[0]) + "," + num(betas[1]));
      break;
    }
  if (!(eps >= 0.0 && std::isfinite(eps))) out.push_back("--eps must be >= 0, got " + num(eps));
  if (!(weight_decay >= 0.0 && std::isfinite(weight_decay)))
    out.push_back("--weight-decay must be >= 0, got " + num(weight_decay));
  if (!(momentum >= 0.0 && momentum < 1.0))
    out.push_back("--momentum must be in [0, 1), got " + num(momentum));
  if (kind == OptimizerKind::kSgd && nesterov && !(momentum > 0.0))
    out.push_back("--nesterov needs --momentum > 0");
  if (kind != OptimizerKind::kSgd && (momentum != 0.0 || nesterov))
    out.push_back("--momentum and --nesterov apply to --optimizer sgd only, not " +
                  to_string(kind) + " (the Adam family's momentum is --betas)");
  if (kind != OptimizerKind::kRAdam && radam_fallback != RAdamFallback::kSkip)
    out.push_back("--radam-fallback applies to --optimizer radam only, not " + to_string(kind));
  if (kind == OptimizerKind::kSgd && adam_init_v != AdamInitV::kZero)
    out.push_back("--adam-init-v applies to the Adam family (adam, adamw, radam), not sgd");
  return out;
}

void OptimizerConfig::validate() const {
  core::throw_if_problems(problems());
}

Optimizer::Optimizer(NamedTensors params, OptimizerConfig config)
    : params_(std::move(params)), config_(config), slots_(params_.size()), lr_scales_(params_.size(), 1.0) {
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
}

void Optimizer::set_lr_scales(std::vector<double> scales) {
  if (scales.size() != params_.size())
    throw std::invalid_argument("optimizer: " + std::to_string(scales.size()) + " lr scales for " +
                                std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < scales.size(); ++i)
    if (!(scales[i] >= 0.0 && std::isfinite(scales[i])))
      throw std::invalid_argument("optimizer: the lr scale of '" + params_[i].first + "' must be finite and >= 0, got " +
                                  num(scales[i]));
  lr_scales_ = std::move(scales);
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.mutable_grad() = torch::Tensor();
}

void Optimizer::step(double lr, bool record_updates) {
  if (!(lr >= 0.0 && std::isfinite(lr)))
    throw std::invalid_argument("optimizer: learning rate must be finite and >= 0, got " + num(lr));
  torch::NoGradGuard no_grad;
  last_updates_.clear();
  std::vector<size_t> ready;  // the parameters with a gradient
  std::vector<torch::Tensor> before;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].second.grad().defined()) continue;
    ready.push_back(i);
    if (record_updates) before.push_back(params_[i].second.clone());
  }
  if (!fused_adam_update(ready, lr))
    for (size_t i : ready) update(params_[i].second, params_[i].second.grad(), slots_[i], lr * lr_scales_[i]);
  for (size_t k = 0; k < before.size(); ++k) last_updates_[params_[ready[k]].first] = params_[ready[k]].second - before[k];
  ++steps_;
}

// torch.optim.Adam/AdamW(fused=True): ATen's kernel reads and writes each parameter, its
// gradient and both moments once, where the single-tensor code of update() makes six passes
// and two temporaries (measured with torch.optim on 36.6M float32 parameters, 2 threads: 0.245 s
// against 0.031 s per step). The same formulas; the results differ from update()'s by rounding
// only (1e-16 relative in float64; tests/train/optimizer_reference.py holds both to torch.optim).
// One call per group of equal lr scale, dtype and device, as torch.optim's parameter groups.
bool Optimizer::fused_adam_update(const std::vector<size_t>& ready, double lr) {
  const auto& c = config_;
  if (c.kind != OptimizerKind::kAdam && c.kind != OptimizerKind::kAdamW) return false;
  for (size_t i : ready) {
    const auto& p = params_[i].second;
    const auto& s = slots_[i];
    if (!p.is_contiguous() || !p.grad().is_contiguous() || p.grad().scalar_type() != p.scalar_type() ||
        (s.exp_avg.defined() && !(s.exp_avg.is_contiguous() && s.exp_avg_sq.is_contiguous())))
      return false;
  }
  // Members of a group share one step count, read (not written) by the kernel as a 0-d tensor.
  std::map<std::tuple<double, c10::ScalarType, c10::DeviceType, c10::DeviceIndex, int64_t>, std::vector<size_t>> groups;
  for (size_t i : ready) {
    const auto& p = params_[i].second;
    auto& s = slots_[i];
    if (!s.exp_avg.defined())  // the moments' start sees Adam's L2 penalty in the gradient, as update()
      init_moments(s, p, c.kind == OptimizerKind::kAdam && c.weight_decay != 0.0 ? p.grad().add(p, c.weight_decay) : p.grad());
    ++s.step;
    groups[{lr_scales_[i], p.scalar_type(), p.device().type(), p.device().index(), s.step}].push_back(i);
  }
  const auto [beta1, beta2] = c.betas;
  for (const auto& [key, members] : groups) {
    const auto& first = params_[members.front()].second;
    const auto step = torch::full({}, static_cast<double>(std::get<4>(key)), first.options().dtype(torch::kFloat));
    std::vector<torch::Tensor> ps, gs, ms, vs, steps(members.size(), step);
    for (size_t i : members) {
      const auto& p = params_[i].second;
      ps.push_back(p);
      gs.push_back(p.grad());
      ms.push_back(slots_[i].exp_avg);
      vs.push_back(slots_[i].exp_avg_sq);
    }
    const double group_lr = lr * std::get<0>(key);
    if (c.kind == OptimizerKind::kAdamW)
      at::_fused_adamw_(ps, gs, ms, vs, {}, steps, group_lr, beta1, beta2, c.weight_decay, c.eps, false, false);
    else
      at::_fused_adam_(ps, gs, ms, vs, {}, steps, group_lr, beta1, beta2, c.weight_decay, c.eps, false, false);
  }
  return true;
}

// m_0 = 0; v_0 = 0, or g_0^2 for GI-Adam (then v_1 = beta2 g_0^2 + (1 - beta2) g_0^2 = g_0^2).
void Optimizer::init_moments(Slot& s, const torch::Tensor& p, const torch::Tensor& g) const {
  s.exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
  s.exp_avg_sq = config_.adam_init_v == AdamInitV::kGradSquared ? g.square()
                                                                : torch::zeros_like(p, torch::MemoryFormat::Preserve);
}

// One parameter. The operations follow torch.optim's single-tensor code (sgd.py, adam.py,
// PyTorch 2.x) and RAdam's authors' radam.py, in their order, so that float64 runs agree to
// rounding.
void Optimizer::update(torch::Tensor& p, const torch::Tensor& grad, Slot& s, double lr) {
  const auto& c = config_;
  const double wd = c.weight_decay;
  const auto [beta1, beta2] = c.betas;
  switch (c.kind) {
    case OptimizerKind::kSgd: {
      auto g = wd != 0.0 ? grad.add(p, wd) : grad;
      if (c.momentum != 0.0) {
        if (!s.momentum_buffer.defined()) {
          s.momentum_buffer = g.detach().clone();
        } else {
          s.momentum_buffer.mul_(c.momentum).add_(g);  // dampening 0
        }
        g = c.nesterov ? g.add(s.momentum_buffer, c.momentum) : s.momentum_buffer;
      }
      p.add_(g, -lr);
      return;
    }
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      ++s.step;
      auto g = grad;
      if (wd != 0.0) {
        if (c.kind == OptimizerKind::kAdamW) {
          p.mul_(1.0 - lr * wd);  // decoupled (Loshchilov & Hutter; fairseq's adam)
        } else {
          g = grad.add(p, wd);  // L2 penalty in the gradient
        }
      }
      if (!s.exp_avg.defined()) init_moments(s, p, g);
      s.exp_avg.lerp_(g, 1.0 - beta1);
      s.exp_avg_sq.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
      const auto t = static_cast<double>(s.step);
      const double bias_correction1 = 1.0 - std::pow(beta1, t);
      const double bias_correction2 = 1.0 - std::pow(beta2, t);
      const double step_size = lr / bias_correction1;
      const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
      auto denom = (s.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(c.eps);
      p.addcdiv_(s.exp_avg, denom, -step_size);
      return;
    }
    case OptimizerKind::kRAdam: {
      if (!s.exp_avg.defined()) init_moments(s, p, grad);
      s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1.0 - beta2);
      s.exp_avg.mul_(beta1).add_(grad, 1.0 - beta1);
      ++s.step;
      // REFERENCE §1: rho_inf = 2/(1-beta2) - 1, rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t).
      const auto t = static_cast<double>(s.step);
      const double beta2_t = std::pow(beta2, t);
      const double rho_inf = 2.0 / (1.0 - beta2) - 1.0;
      const double rho_t = rho_inf - 2.0 * t * beta2_t / (1.0 - beta2_t);
      const double bias_correction1 = 1.0 - std::pow(beta1, t);
      if (rho_t >= 5.0) {
        // r_t sqrt(1 - beta2^t) / (1 - beta1^t), with the authors' grouping of the factors.
        const double step_size = std::sqrt((1.0 - beta2_t) * (rho_t - 4.0) / (rho_inf - 4.0) *
                                           (rho_t - 2.0) / rho_t * rho_inf / (rho_inf - 2.0)) /
                                 bias_correction1;
        if (wd != 0.0) p.add_(p, -wd * lr);
        auto denom = s.exp_avg_sq.sqrt().add_(c.eps);
        p.addcdiv_(s.exp_avg, denom, -step_size * lr);
      } else if (c.radam_fallback == RAdamFallback::kSgd) {
        if (wd != 0.0) p.add_(p, -wd * lr);
        p.add_(s.exp_avg, -(1.0 / bias_correction1) * lr);
      }
      return;
    }
  }
}

TensorMap Optimizer::state() const {
  TensorMap out;
  out[kStepsKey] = int_scalar(steps_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& name = params_[i].first;
    const auto& s = slots_[i];
    if (s.exp_avg.defined()) {
      out[std::string(kStep) + "." + name] = int_scalar(s.step);
      out[std::string(kExpAvg) + "." + name] = s.exp_avg.detach().clone();
      out[std::string(kExpAvgSq) + "." + name] = s.exp_avg_sq.detach().clone();
    }
    if (s.momentum_buffer.defined())
      out[std::string(kMomentum) + "." + name] = s.momentum_buffer.detach().clone();
  }
  return out;
}

void Optimizer::load_state(const TensorMap& state) {
  torch::NoGradGuard no_grad;
  const auto fail = [](const std::string& msg) {
    return std::runtime_error("optimizer state: " + msg);
  };
  const auto steps_it = state.find(kStepsKey);
  if (steps_it == state.end()) throw fail("no '" + std::string(kStepsKey) + "' entry");
  const auto scalar = [&](const std::string& key, const torch::Tensor& t) {
    if (t.numel() != 1 || t.is_floating_point())
      throw fail("'" + key + "' must be one integer, got shape " + shape_of(t));
    const int64_t v = t.item<int64_t>();
    if (v < 0) throw fail("'" + key + "' is negative (" + std::to_string(v) + ")");
    return v;
  };

  std::vector<Slot> slots(params_.size());
  size_t used = 1;  // "steps"
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    const auto find = [&](const char* prefix) -> torch::Tensor {
      const auto it = state.find(std::string(prefix) + "." + name);
      if (it == state.end()) return {};
      ++used;
      const auto& t = it->second;
      if (!t.sizes().equals(p.sizes()))
        throw fail("'" + it->first + "' has shape " + shape_of(t) + ", the parameter " +
                   shape_of(p));
      return t.to(p.device(), p.scalar_type(), /*non_blocking=*/false, /*copy=*/true)
          .contiguous();
    };
    auto& s = slots[i];
    s.exp_avg = find(kExpAvg);
    s.exp_avg_sq = find(kExpAvgSq);
    s.momentum_buffer = find(kMomentum);
    const auto step_it = state.find(std::string(kStep) + "." + name);
    if (step_it != state.end()) {
      ++used;
      s.step = scalar(step_it->first, step_it->second);
    }
    const bool adam = adam_family(config_.kind);
    const bool has_step = step_it != state.end();
    if (s.exp_avg.defined() != s.exp_avg_sq.defined() || s.exp_avg.defined() != has_step)
      throw fail("'" + name + "' needs all or none of step, exp_avg and exp_avg_sq");
    if ((has_step && !adam) || (s.momentum_buffer.defined() && config_.kind != OptimizerKind::kSgd))
      throw fail("'" + name + "' has state of another optimiser than --optimizer " +
                 to_string(config_.kind));
  }
  if (used != state.size()) {
    std::set<std::string> known{kStepsKey};
    for (const auto& [name, p] : params_)
      for (const char* prefix : {kStep, kExpAvg, kExpAvgSq, kMomentum})
        known.insert(std::string(prefix) + "." + name);
    for (const auto& [key, t] : state)
      if (!known.count(key)) throw fail("unknown entry '" + key + "' (no such parameter?)");
  }
  steps_ = scalar(kStepsKey, steps_it->second);
  slots_ = std::move(slots);
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

void to_json(nlohmann::json& j, const OptimizerConfig& c) {
  j = {{"optimizer", to_string(c.kind)},
       {"betas", {c.betas[0], c.betas[1]}},
       {"eps", c.eps},
       {"weight_decay", c.weight_decay},
       {"momentum", c.momentum},
       {"nesterov", c.nesterov},
       {"radam_fallback", to_string(c.radam_fallback)},
       {"adam_init_v", to_string(c.adam_init_v)}};
}

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
}

}  // namespace normlab::train
