// The optimiser as the training step sees it (fairseq's FP16Optimizer, REFERENCE §7-8): the
// gradient of the loss summed over an update's batches is divided by its target tokens (and by
// fp16's loss scale), measured and clipped; under fp16 an overflow skips the step. Precision is
// this part, not branches in the loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "model/checkpoint.h"
#include "train/loss_scaler.h"
#include "train/optimizer.h"

namespace normlab::train {

class ScaledOptimizer {
 public:
  // `scaler`: fp16's dynamic loss scaler, or null (fp32, bf16). `clip_norm` <= 0: measure only.
  ScaledOptimizer(Optimizer& optimizer, std::vector<torch::Tensor> params, std::unique_ptr<DynamicLossScaler> scaler,
                  double clip_norm);
  // backward of `loss` (summed over a batch's tokens), multiplied by the loss scale under fp16.
  void backward(const torch::Tensor& loss) const;
  // After the update's last backward: the gradients divided by its `tokens` (all ranks') and the
  // scale, clipped. Returns the norm before clipping, or nothing when fp16 overflowed: the step
  // is skipped and the scale shrinks.
  std::optional<double> unscale_and_clip(int64_t tokens);
  void step(double lr, bool record_updates) { optimizer_.step(lr, record_updates); }
  double loss_scale() const { return scaler_ ? scaler_->scale() : 0.0; }  // 0: no loss scaling
  const Optimizer& optimizer() const { return optimizer_; }

  // The optimiser's and the scaler's state, into / from a checkpoint's extra tensors.
  void save_state(model::TensorMap& extra) const;
  void load_state(const model::TensorMap& saved, const torch::Device& device);

 private:
  Optimizer& optimizer_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<DynamicLossScaler> scaler_;
  double clip_norm_;
};

// fp16's scaler: fairseq's dynamic loss scaling, its window by default 2^14 / (ranks x update-freq).
std::unique_ptr<DynamicLossScaler> make_loss_scaler(const LossScalerConfig& config, int ranks, int64_t update_freq);

}  // namespace normlab::train
