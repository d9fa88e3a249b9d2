// The one criterion (fairseq's `criterion(model, sample)`): the model's forward on a batch and
// its label-smoothed loss. Training, validation, `normlab score` and every analysis take their
// loss here; loss.h holds the formula on logits.
#pragma once

#include <string>
#include <vector>

#include <torch/types.h>

#include "data/batch.h"
#include "model/model.h"
#include "train/loss.h"

namespace normlab::train {

struct LossOptions {
  double label_smoothing = 0.1;  // eps in [0, 1) (REFERENCE §2)
  LabelSmoothingFormula formula = LabelSmoothingFormula::kUniform;  // how eps is spread (loss.h)
  double z_loss = 0.0;  // C: the loss also holds C (log Z)^2 per target token (loss.h); 0: none

  // Every problem at once, naming the option (--label-smoothing, --z-loss).
  std::vector<std::string> problems() const;
};

struct BatchLoss {
  LossSums sums;         // over the batch's non-padding target tokens
  torch::Tensor logits;  // (B,T,V) in the model's precision, for instruments that look at them
};

// The forward of the model's kind on `batch` (model.h: the kind reads its fields, on the
// device of its parameters) in its current mode (dropout) and autograd mode, then
// label_smoothed_nll against the batch's target with `options`, padding model::target_padding
// (kPad; a classifier's targets have none).
BatchLoss loss(model::Model model, const data::Batch& batch, const LossOptions& options);

}  // namespace normlab::train
