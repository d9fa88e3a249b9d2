#include "train/criterion.h"

#include <torch/torch.h>

#include "core/tokens.h"

namespace normlab::train {

std::vector<std::string> LossOptions::problems() const {
  std::vector<std::string> out;
  if (!(label_smoothing >= 0 && label_smoothing < 1))
    out.push_back("--label-smoothing must be in [0, 1), got " + std::to_string(label_smoothing));
  if (!(z_loss >= 0)) out.push_back("--z-loss must be >= 0, got " + std::to_string(z_loss));
  return out;
}

BatchLoss loss(model::Model model, const data::Batch& batch, const LossOptions& options) {
  auto logits = model->forward(batch);  // (B,T,V)
  auto sums = label_smoothed_nll(logits, batch.target.to(logits.device()), options.label_smoothing, options.formula, kPad,
                                 options.z_loss);
  return {std::move(sums), std::move(logits)};
}

}  // namespace normlab::train
