#include "train/loss_scaler.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <torch/torch.h>

#include "train/train_options.h"

namespace normlab::train {

std::vector<std::string> LossScalerConfig::problems() const {
  std::vector<std::string> p = loss_scaler_options().problems(*this);
  if (!(min_scale > 0 && min_scale < init_scale)) p.push_back("--min-loss-scale must be in (0, --fp16-init-scale)");
  return p;
}

DynamicLossScaler::DynamicLossScaler(const LossScalerConfig& config, int64_t window)
    : config_(config), window_(window), scale_(config.init_scale) {
  if (window_ < 1) throw std::invalid_argument("loss scale window must be >= 1");
}

bool DynamicLossScaler::step(double grad_norm) {
  if (!std::isfinite(grad_norm)) {  // fairseq's check_overflow (its default tolerance 0: every overflow shrinks)
    const double previous = scale_;
    last_overflow_iter_ = iter_;
    scale_ /= config_.factor;
    if (scale_ <= config_.min_scale) {
      scale_ = previous;
      std::ostringstream s;
      s << "fp16: the loss scale would fall below --min-loss-scale " << config_.min_scale
        << ": the loss is probably exploding (lower the learning rate, clip gradients, enlarge the batch, or use bf16)";
      throw std::runtime_error(s.str());
    }
    ++iter_;
    return false;
  }
  // fairseq's update(): after `window` clean iterations since the last overflow, grow.
  if ((iter_ - last_overflow_iter_) % window_ == 0) scale_ *= config_.factor;
  ++iter_;
  return true;
}

torch::Tensor DynamicLossScaler::state() const {
  return torch::tensor({scale_, static_cast<double>(iter_), static_cast<double>(last_overflow_iter_)},
                       torch::kFloat64);
}

void DynamicLossScaler::load_state(const torch::Tensor& state) {
  TORCH_CHECK(state.numel() == 3, "loss scaler state: expected 3 numbers, got ", state.numel());
  const auto s = state.to(torch::kFloat64).contiguous();
  const double* v = s.data_ptr<double>();
  scale_ = v[0];
  iter_ = static_cast<int64_t>(v[1]);
  last_overflow_iter_ = static_cast<int64_t>(v[2]);
}

}  // namespace normlab::train
