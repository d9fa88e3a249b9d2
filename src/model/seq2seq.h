// The encoder-decoder model, the first model kind (model.h; registered as "encoder-decoder").
// The scheme is fixed at construction (ModelConfig::scheme).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "model/config.h"
#include "model/layers.h"
#include "model/model.h"

namespace normlab::model {

class Seq2SeqImpl : public ModelImpl {
 public:
  explicit Seq2SeqImpl(const ModelConfig& config);  // validates config

  // src (B,S), prev_output_tokens (B,T) -> logits (B,T,V), in precision() (bf16/fp16 logits
  // under mixed precision: the loss takes them to fp32).
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& prev_output_tokens);
  // The batch's src and prev_output_tokens, on the parameters' device.
  torch::Tensor forward(const data::Batch& batch) override;
  // {"encoder": its states (B,S,C), "decoder": the logits (B,T,V)}.
  std::map<std::string, torch::Tensor> stack_outputs(const data::Batch& batch) override;

  // initialize()'s work for every scheme (init.h); Admin's profiling pass on `profile`.
  void init_parameters(const data::Batch* profile) override;
  // The encoder's stack (self_attn, ffn blocks; it reads src), then the decoder's (self_attn,
  // encoder_attn, ffn; it reads prev_output_tokens).
  std::vector<StackView> stacks() override;
  std::map<std::string, std::string> tied_aliases() const override;
  // common_manifest(), the source's appended eos and the decoder's start token.
  nlohmann::json manifest() const override;

  Encoder encoder{nullptr};
  Decoder decoder{nullptr};
};
TORCH_MODULE(Seq2Seq);

// `model` as the encoder-decoder, for what only that kind has (decoding, layers added to its
// stacks, the probes of its two stacks). Throws std::invalid_argument "`what` needs an
// encoder-decoder model, not KIND" for the other kinds.
Seq2Seq as_encoder_decoder(const Model& model, const std::string& what);

}  // namespace normlab::model
