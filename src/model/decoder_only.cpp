#include "model/decoder_only.h"

#include <cmath>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/init.h"
#include "model/scheme_constants.h"

namespace normlab::model {

DecoderOnlyImpl::DecoderOnlyImpl(const ModelConfig& config) : ModelImpl(config) {
  decoder = register_module("decoder", Decoder(this->config(), nullptr));
}

torch::Tensor DecoderOnlyImpl::forward(const torch::Tensor& tokens) {
  auto guard = precision_guard();
  return decoder(tokens, EncoderOut{});
}

torch::Tensor DecoderOnlyImpl::forward(const data::Batch& batch) {
  return forward(batch.prev_output_tokens.to(decoder->embed_tokens->weight.device()));
}

void DecoderOnlyImpl::init_parameters(const data::Batch* profile) { init_decoder_only(*this, profile); }

std::vector<StackView> DecoderOnlyImpl::stacks() {
  StackView dec{"decoder", {}, decoder->layer_norm, &data::Batch::prev_output_tokens};
  for (const auto& m : *decoder->layers) {
    auto& layer = *m->as<DecoderLayerImpl>();
    LayerView v;
    v.blocks = {{"self_attn", &layer.self_attn_block}, {"ffn", &layer.ffn_block}};
    v.attentions = {{"self_attn", layer.self_attn}};
    dec.layers.push_back(std::move(v));
  }
  return {std::move(dec)};
}

std::map<std::string, std::string> DecoderOnlyImpl::tied_aliases() const {
  if (config().share == SharedEmbeddings::kNone) return {};
  return {{"decoder.output_projection.weight", "decoder.embed_tokens.weight"}};
}

nlohmann::json DecoderOnlyImpl::manifest() const {
  const auto& c = config();
  return {
      {"scheme", scheme_manifest()},
      {"special_tokens", {{"bos", kBos}, {"pad", kPad}, {"eos", kEos}, {"unk", kUnk}}},
      {"line_end_token", kEos},
      {"position_offset", kPositionOffset},
      {"embed_scale", std::sqrt(static_cast<double>(c.d_model))},
      {"layer_norm_eps", kNormEps},
  };
}

}  // namespace normlab::model
