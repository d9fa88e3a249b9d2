// fp16 training's dynamic loss scaling, as fairseq's DynamicLossScaler does it
// (fairseq/optim/dynamic_loss_scaler.py; REFERENCE §7): the loss is multiplied by the scale
// before backward so that small gradients survive fp16; an update whose gradient norm is not
// finite is skipped and the scale divided by `factor`; after `window` updates without an
// overflow the scale is multiplied by `factor`; below `min_scale` training stops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace normlab::train {

struct LossScalerConfig {
  double init_scale = 128.0;  // --fp16-init-scale (fairseq: 2^7)
  int64_t window = 0;         // --fp16-scale-window; 0: fairseq's 2^14 / world size / update-freq
  double factor = 2.0;        // fairseq's scale_factor
  double min_scale = 1e-4;    // --min-loss-scale (fairseq's default)
  std::vector<std::string> problems() const;  // every problem, naming the option
};

class DynamicLossScaler {
 public:
  // `window` resolved (> 0).
  DynamicLossScaler(const LossScalerConfig& config, int64_t window);
  double scale() const { return scale_; }
  // After an update's backward, given its (unscaled) gradient norm: true when the update may be
  // applied (then the scale may grow); false on an overflow (the update is skipped and the
  // scale shrinks). Throws std::runtime_error when the scale would fall to min_scale or below.
  bool step(double grad_norm);
  // scale, iterations, last overflow's iteration: for checkpoints.
  torch::Tensor state() const;
  void load_state(const torch::Tensor& state);

 private:
  LossScalerConfig config_;
  int64_t window_;
  double scale_;
  int64_t iter_ = 0, last_overflow_iter_ = -1;
};

}  // namespace normlab::train
