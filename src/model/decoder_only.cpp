#include "model/decoder_only.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/init.h"

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
  auto j = common_manifest();
  j["line_end_token"] = kEos;  // every line of running text ends in </s> (data/text_stream.h)
  return j;
}

DecoderOnly as_decoder_only(const Model& model, const std::string& what) {
  if (auto lm = std::dynamic_pointer_cast<DecoderOnlyImpl>(model.ptr())) return DecoderOnly(lm);
  throw std::invalid_argument(what + " needs a " + std::string(kDecoderOnly) + " model, not " + model->kind());
}

}  // namespace normlab::model
