#include "train/optimizer_algorithm.h"

#include <sstream>

#include <torch/torch.h>

namespace normlab::train {
namespace {

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

}  // namespace

std::runtime_error state_error(const std::string& message) {
  return std::runtime_error("optimizer state: " + message);
}

std::string state_key(const char* prefix, const std::string& name) { return std::string(prefix) + "." + name; }

StateReader::StateReader(const TensorMap& state, const NamedTensors& params) : state_(state), params_(params) {}

torch::Tensor StateReader::tensor(const char* prefix, size_t i) {
  const auto& p = params_[i].second;
  const auto it = state_.find(state_key(prefix, params_[i].first));
  if (it == state_.end()) return {};
  read_.insert(it->first);
  const auto& t = it->second;
  if (!t.sizes().equals(p.sizes()))
    throw state_error("'" + it->first + "' has shape " + shape_of(t) + ", the parameter " + shape_of(p));
  return t.to(p.device(), p.scalar_type(), /*non_blocking=*/false, /*copy=*/true).contiguous();
}

std::optional<int64_t> StateReader::count(const char* prefix, size_t i) {
  return count(state_key(prefix, params_[i].first));
}

std::optional<int64_t> StateReader::count(const std::string& key) {
  const auto it = state_.find(key);
  if (it == state_.end()) return std::nullopt;
  read_.insert(key);
  const auto& t = it->second;
  if (t.numel() != 1 || t.is_floating_point())
    throw state_error("'" + key + "' must be one integer, got shape " + shape_of(t));
  const int64_t v = t.item<int64_t>();
  if (v < 0) throw state_error("'" + key + "' is negative (" + std::to_string(v) + ")");
  return v;
}

std::optional<double> StateReader::number(const std::string& key) {
  const auto it = state_.find(key);
  if (it == state_.end()) return std::nullopt;
  read_.insert(key);
  const auto& t = it->second;
  if (t.numel() != 1 || !t.is_floating_point())
    throw state_error("'" + key + "' must be one floating-point number, got shape " + shape_of(t));
  return t.to(torch::kCPU, torch::kFloat64).item<double>();
}

// An unread "<prefix>.<parameter name>" is another optimiser's; anything else is unknown.
void StateReader::refuse_unread(const std::string& optimizer) const {
  for (const auto& [key, t] : state_) {
    if (read_.count(key)) continue;
    for (const auto& [name, p] : params_)
      if (key.size() > name.size() + 1 && key.compare(key.size() - name.size(), name.size(), name) == 0 &&
          key[key.size() - name.size() - 1] == '.')
        throw state_error("'" + key + "' is state of another optimiser than --optimizer " + optimizer);
    throw state_error("unknown entry '" + key + "' (no such parameter?)");
  }
}

void OptimizerAlgorithm::step(const NamedTensors& params, const std::vector<size_t>& ready,
                              const std::vector<double>& lr_scales, double lr) {
  for (size_t i : ready) update(params[i].second, params[i].second.grad(), i, lr * lr_scales[i]);
}

void OptimizerAlgorithm::save_state(const NamedTensors&, TensorMap&) const {}

void OptimizerAlgorithm::load_state(StateReader&) {}

void OptimizerAlgorithm::preconditioner(torch::Tensor, size_t, Preconditioner, const torch::Tensor&) const {
  throw std::logic_error("optimizer " + to_string(config_.kind) + " has no preconditioner (preconditioned() is false)");
}

}  // namespace normlab::train
