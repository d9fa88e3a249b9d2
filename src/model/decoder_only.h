// The decoder-only causal language model, the second model kind (model.h; registered as
// "decoder-only"): fairseq's transformer_lm, i.e. the encoder-decoder's decoder without encoder
// attention, one vocabulary, the output projection tied to the token table by default
// (--share decoder). docs/schemes.md, "Model kinds".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/layers.h"
#include "model/model.h"

namespace normlab::model {

class DecoderOnlyImpl : public ModelImpl {
 public:
  explicit DecoderOnlyImpl(const ModelConfig& config);  // validates config

  // tokens (B,T) -> logits (B,T,V) of the next token at each position, in precision(); position t
  // sees tokens 0..t only (causal self-attention; right padding masked as keys).
  torch::Tensor forward(const torch::Tensor& tokens);
  // The batch's prev_output_tokens (its src is not read), on the parameters' device.
  torch::Tensor forward(const data::Batch& batch) override;

  void init_parameters(const data::Batch* profile) override;  // init.h's init_decoder_only
  std::vector<StackView> stacks() override;                  // the decoder (self_attn, ffn)
  std::map<std::string, std::string> tied_aliases() const override;
  // common_manifest() and the token that ends every line of text (</s>).
  nlohmann::json manifest() const override;

  Decoder decoder{nullptr};
};
TORCH_MODULE(DecoderOnly);

// `model` as a decoder-only model; else std::invalid_argument "WHAT needs a decoder-only model,
// not KIND".
DecoderOnly as_decoder_only(const Model& model, const std::string& what);

}  // namespace normlab::model
