#include "model/seq2seq.h"

#include <torch/torch.h>

namespace normlab::model {

namespace {
const ModelConfig& validated(const ModelConfig& c) {
  c.validate();
  return c;
}
}  // namespace

Seq2SeqImpl::Seq2SeqImpl(const ModelConfig& config) : config_(validated(config)) {
  encoder = register_module("encoder", Encoder(config_));
  decoder = register_module(
      "decoder",
      Decoder(config_, config_.share == SharedEmbeddings::kAll ? encoder->embed_tokens : nullptr));
}

torch::Tensor Seq2SeqImpl::forward(const torch::Tensor& src, const torch::Tensor& prev_output_tokens) {
  auto guard = precision_guard();
  return decoder(prev_output_tokens, encoder(src));
}

PrecisionGuard Seq2SeqImpl::precision_guard() const {
  return PrecisionGuard(precision_, encoder->embed_tokens->weight.device());
}

std::map<std::string, std::string> Seq2SeqImpl::tied_aliases() const {
  switch (config_.share) {
    case SharedEmbeddings::kAll:
      return {{"decoder.embed_tokens.weight", "encoder.embed_tokens.weight"},
              {"decoder.output_projection.weight", "encoder.embed_tokens.weight"}};
    case SharedEmbeddings::kDecoder:
      return {{"decoder.output_projection.weight", "decoder.embed_tokens.weight"}};
    case SharedEmbeddings::kNone:
      break;
  }
  return {};
}

}  // namespace normlab::model
