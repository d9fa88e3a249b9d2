#include "model/encoder_only.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "model/init.h"
#include "model/linear.h"

namespace normlab::model {

MaskedLmHeadImpl::MaskedLmHeadImpl(const ModelConfig& c, torch::nn::Embedding tied)
    : tied_(std::move(tied)), activation_(c.activation) {
  dense = register_module("dense", torch::nn::Linear(c.d_model, c.d_model));
  layer_norm = register_module("layer_norm", Norm(c.scheme.norm_kind, c.d_model));
  if (!tied_) weight = register_parameter("weight", torch::empty({c.src_vocab_size, c.d_model}));
  bias = register_parameter("bias", torch::zeros({c.src_vocab_size}));
}

torch::Tensor MaskedLmHeadImpl::output_weight() const { return tied_ ? tied_->weight : weight; }

torch::Tensor MaskedLmHeadImpl::forward(const torch::Tensor& x) {
  return linear(layer_norm(activate(linear(dense, x), activation_)), output_weight(), bias);
}

EncoderOnlyImpl::EncoderOnlyImpl(const ModelConfig& config) : ModelImpl(config) {
  encoder = register_module("encoder", Encoder(this->config()));
  lm_head = register_module(
      "lm_head", MaskedLmHead(this->config(),
                              this->config().share == SharedEmbeddings::kNone ? nullptr : encoder->embed_tokens));
}

torch::Tensor EncoderOnlyImpl::forward(const torch::Tensor& tokens, const torch::Tensor& segments) {
  auto guard = precision_guard();
  return lm_head(encoder(tokens, segments).out);
}

torch::Tensor EncoderOnlyImpl::forward(const data::Batch& batch) {
  return forward(batch.src.to(encoder->embed_tokens->weight.device()), batch.segments);
}

void EncoderOnlyImpl::init_parameters(const data::Batch* profile) { init_encoder_only(*this, profile); }

std::vector<StackView> EncoderOnlyImpl::stacks() {
  StackView enc{"encoder", {}, encoder->layer_norm, &data::Batch::src};
  for (const auto& m : *encoder->layers) {
    auto& layer = *m->as<EncoderLayerImpl>();
    LayerView v;
    v.blocks = {{"self_attn", &layer.self_attn_block}, {"ffn", &layer.ffn_block}};
    v.attentions = {{"self_attn", layer.self_attn}};
    enc.layers.push_back(std::move(v));
  }
  return {std::move(enc)};
}

std::map<std::string, std::string> EncoderOnlyImpl::tied_aliases() const {
  if (config().share == SharedEmbeddings::kNone) return {};
  return {{"lm_head.weight", "encoder.embed_tokens.weight"}};
}

nlohmann::json EncoderOnlyImpl::manifest() const {
  auto j = common_manifest();
  j["mask_token"] = mask_token(config());
  return j;
}

EncoderOnly as_encoder_only(const Model& model, const std::string& what) {
  if (auto mlm = std::dynamic_pointer_cast<EncoderOnlyImpl>(model.ptr())) return EncoderOnly(mlm);
  throw std::invalid_argument(what + " needs an " + std::string(kEncoderOnly) + " model, not " + model->kind());
}

}  // namespace normlab::model
