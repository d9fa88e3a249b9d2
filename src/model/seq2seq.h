// The encoder-decoder model. The scheme is fixed at construction (ModelConfig::scheme).
#pragma once

#include <map>
#include <string>

#include <torch/nn/module.h>

#include "model/config.h"
#include "model/layers.h"

namespace normlab::model {

class Seq2SeqImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqImpl(const ModelConfig& config);  // validates config

  // src (B,S), prev_output_tokens (B,T) -> logits (B,T,V)
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& prev_output_tokens);

  const ModelConfig& config() const { return config_; }
  // fairseq names of shared tables that are not stored separately: alias -> stored name.
  std::map<std::string, std::string> tied_aliases() const;

  Encoder encoder{nullptr};
  Decoder decoder{nullptr};

 private:
  ModelConfig config_;
};
TORCH_MODULE(Seq2Seq);

}  // namespace normlab::model
