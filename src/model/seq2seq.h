// The encoder-decoder model. The scheme is fixed at construction (ModelConfig::scheme).
#pragma once

#include <map>
#include <string>

#include <torch/nn/module.h>

#include "model/config.h"
#include "model/layers.h"
#include "model/precision.h"

namespace normlab::model {

class Seq2SeqImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqImpl(const ModelConfig& config);  // validates config

  // src (B,S), prev_output_tokens (B,T) -> logits (B,T,V), in precision() (bf16/fp16 logits
  // under mixed precision: the loss takes them to fp32).
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& prev_output_tokens);

  // Mixed precision of forward() and of decoding (precision.h): a run-time setting, not part
  // of the configuration or the checkpoint (the weights stay fp32). Default fp32.
  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }
  // A guard for precision() on the device of the weights, for code that calls the encoder
  // and decoder directly (beam search, probes).
  PrecisionGuard precision_guard() const;

  const ModelConfig& config() const { return config_; }
  // fairseq names of shared tables that are not stored separately: alias -> stored name.
  std::map<std::string, std::string> tied_aliases() const;

  Encoder encoder{nullptr};
  Decoder decoder{nullptr};

 private:
  ModelConfig config_;
  Precision precision_ = Precision::kFp32;
};
TORCH_MODULE(Seq2Seq);

}  // namespace normlab::model
