// `normlab train --eval-bleu` (docs/translate.md): the validation set beam-searched at every
// validation, its corpus BLEU added to the record as valid_bleu. The decoder and the metric
// (BleuValidator) live above train/ and are given by the caller (apps/normlab/cmd_train.cpp).
#pragma once

#include "train/bleu_validator.h"
#include "train/callback.h"

namespace normlab::train {

class BleuValidation final : public TrainCallback {
 public:
  // `validator` outlives the run; `eval_bleu`: --eval-bleu (else only its settings are recorded).
  BleuValidation(BleuValidator& validator, bool eval_bleu) : validator_(validator), on_(eval_bleu) {}
  std::vector<std::string> problems(const TrainConfig& config, const core::ProcessGroup& group) const override;
  void add_settings(nlohmann::json& config) const override;
  void train_begins(const RunContext& run) override;
  void validation_done(nlohmann::json& record) override;

 private:
  BleuValidator& validator_;
  bool on_;
  const RunContext* run_ = nullptr;
  model::Seq2Seq net_{nullptr};  // run_->net as the encoder-decoder that it decodes
};

}  // namespace normlab::train
