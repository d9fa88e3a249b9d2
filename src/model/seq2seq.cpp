#include "model/seq2seq.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/init.h"

namespace normlab::model {

Seq2SeqImpl::Seq2SeqImpl(const ModelConfig& config) : ModelImpl(config) {
  const auto& c = this->config();
  encoder = register_module("encoder", Encoder(c));
  decoder = register_module(
      "decoder", Decoder(c, c.share == SharedEmbeddings::kAll ? encoder->embed_tokens : nullptr));
}

torch::Tensor Seq2SeqImpl::forward(const torch::Tensor& src, const torch::Tensor& prev_output_tokens) {
  auto guard = precision_guard();
  return decoder(prev_output_tokens, encoder(src));
}

torch::Tensor Seq2SeqImpl::forward(const data::Batch& batch) {
  const auto device = encoder->embed_tokens->weight.device();
  return forward(batch.src.to(device), batch.prev_output_tokens.to(device));
}

std::map<std::string, torch::Tensor> Seq2SeqImpl::stack_outputs(const data::Batch& batch) {
  auto guard = precision_guard();
  const auto device = encoder->embed_tokens->weight.device();
  auto enc = encoder(batch.src.to(device));
  auto logits = decoder(batch.prev_output_tokens.to(device), enc);
  return {{"encoder", enc.out}, {"decoder", logits}};
}

void Seq2SeqImpl::init_parameters(const data::Batch* profile) { init_encoder_decoder(*this, profile); }

namespace {

template <typename Layer>
LayerView layer_view(Layer& layer) {
  LayerView v;
  v.blocks.emplace_back("self_attn", &layer.self_attn_block);
  v.attentions.emplace_back("self_attn", layer.self_attn);
  if constexpr (std::is_same_v<Layer, DecoderLayerImpl>) {
    v.blocks.emplace_back("encoder_attn", &layer.encoder_attn_block);
    v.attentions.emplace_back("encoder_attn", layer.encoder_attn);
  }
  v.blocks.emplace_back("ffn", &layer.ffn_block);
  return v;
}

}  // namespace

std::vector<StackView> Seq2SeqImpl::stacks() {
  StackView enc{"encoder", {}, encoder->layer_norm, &data::Batch::src};
  for (const auto& m : *encoder->layers) enc.layers.push_back(layer_view(*m->as<EncoderLayerImpl>()));
  StackView dec{"decoder", {}, decoder->layer_norm, &data::Batch::prev_output_tokens};
  for (const auto& m : *decoder->layers) dec.layers.push_back(layer_view(*m->as<DecoderLayerImpl>()));
  return {std::move(enc), std::move(dec)};
}

std::map<std::string, std::string> Seq2SeqImpl::tied_aliases() const {
  switch (config().share) {
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

nlohmann::json Seq2SeqImpl::manifest() const {
  auto j = common_manifest();
  j["source_append_eos"] = true;
  j["decoder_start_token"] = kEos;
  return j;
}

Seq2Seq as_encoder_decoder(const Model& model, const std::string& what) {
  if (auto seq2seq = std::dynamic_pointer_cast<Seq2SeqImpl>(model.ptr())) return Seq2Seq(seq2seq);
  throw std::invalid_argument(what + " needs an " + kEncoderDecoder + " model, not " + model->kind());
}

}  // namespace normlab::model
