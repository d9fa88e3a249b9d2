#include "train/scaled_optimizer.h"

#include <algorithm>
#include <cstring>

namespace normlab::train {
namespace {

constexpr const char* kLossScalerKey = "fp16/loss_scaler";
constexpr const char* kOptimizerPrefix = "optimizer/";

}  // namespace

ScaledOptimizer::ScaledOptimizer(Optimizer& optimizer, std::vector<torch::Tensor> params,
                                 std::unique_ptr<DynamicLossScaler> scaler, double clip_norm)
    : optimizer_(optimizer), params_(std::move(params)), scaler_(std::move(scaler)), clip_norm_(clip_norm) {}

void ScaledOptimizer::backward(const torch::Tensor& loss) const {
  (scaler_ ? loss * scaler_->scale() : loss).backward();
}

std::optional<double> ScaledOptimizer::unscale_and_clip(int64_t tokens) {
  for (auto& p : params_)
    if (p.grad().defined()) p.grad().div_(static_cast<double>(tokens) * (scaler_ ? scaler_->scale() : 1.0));
  const double norm = clip_grad_norm(params_, clip_norm_);
  if (scaler_ && !scaler_->step(norm)) return std::nullopt;
  return norm;
}

void ScaledOptimizer::save_state(model::TensorMap& extra) const {
  for (const auto& [k, v] : optimizer_.state()) extra[kOptimizerPrefix + k] = v;
  if (scaler_) extra[kLossScalerKey] = scaler_->state();
}

void ScaledOptimizer::load_state(const model::TensorMap& saved, const torch::Device& device) {
  model::TensorMap state;
  for (const auto& [k, v] : saved)
    if (k.rfind(kOptimizerPrefix, 0) == 0) state[k.substr(std::strlen(kOptimizerPrefix))] = v.to(device);
  optimizer_.load_state(state);
  if (scaler_ && saved.count(kLossScalerKey)) scaler_->load_state(saved.at(kLossScalerKey));
}

std::unique_ptr<DynamicLossScaler> make_loss_scaler(const LossScalerConfig& config, int ranks, int64_t update_freq) {
  const int64_t window = config.window > 0 ? config.window : std::max<int64_t>(1, 16384 / (ranks * update_freq));
  return std::make_unique<DynamicLossScaler>(config, window);
}

}  // namespace normlab::train
