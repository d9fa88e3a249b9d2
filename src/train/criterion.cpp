#include "train/criterion.h"

#include <torch/torch.h>

#include "core/tokens.h"
#include "train/train_options.h"

namespace normlab::train {

std::vector<std::string> LossOptions::problems() const { return loss_options().problems(*this); }

BatchLoss loss(model::Model model, const data::Batch& batch, const LossOptions& options) {
  auto logits = model->forward(batch);  // (B,T,V)
  auto sums = label_smoothed_nll(logits, batch.target.to(logits.device()), options.label_smoothing, options.formula,
                                 model::target_padding(model->config()),
                                 options.z_loss);
  return {std::move(sums), std::move(logits)};
}

}  // namespace normlab::train
