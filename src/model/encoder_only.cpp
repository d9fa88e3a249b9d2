#include "model/encoder_only.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "model/dropout.h"
#include "model/init.h"
#include "model/linear.h"
#include "model/width.h"

namespace normlab::model {

MaskedLmHeadImpl::MaskedLmHeadImpl(const ModelConfig& c, torch::nn::Embedding tied)
    : tied_(std::move(tied)), activation_(c.activation), readout_multiplier_(readout_multiplier(c)) {
  dense = register_module("dense", torch::nn::Linear(c.d_model, c.d_model));
  layer_norm = register_module("layer_norm", Norm(c.scheme.norm_kind, c.d_model));
  if (!tied_) weight = register_parameter("weight", torch::empty({c.src_vocab_size, c.d_model}));
  bias = register_parameter("bias", torch::zeros({c.src_vocab_size}));
}

torch::Tensor MaskedLmHeadImpl::output_weight() const { return tied_ ? tied_->weight : weight; }

torch::Tensor MaskedLmHeadImpl::forward(const torch::Tensor& x) {
  auto h = layer_norm(activate(linear(dense, x), activation_));
  if (readout_multiplier_ != 1.0) h = h * readout_multiplier_;  // MuReadout: the bias is not scaled
  return linear(h, output_weight(), bias);
}

ClassificationHeadImpl::ClassificationHeadImpl(const ModelConfig& c)
    : pooling_(c.pooling), dropout_(c.dropout), readout_multiplier_(readout_multiplier(c)) {
  dense = register_module("dense", torch::nn::Linear(c.d_model, c.d_model));
  out_proj = register_module("out_proj", torch::nn::Linear(c.d_model, c.classes));
}

torch::Tensor ClassificationHeadImpl::pooled(const torch::Tensor& x, const torch::Tensor& padding) const {
  if (pooling_ == ClassifierPooling::kCls) return x.narrow(1, 0, 1);  // <s>
  auto kept = padding.logical_not().unsqueeze(-1).to(x.scalar_type());  // (B,S,1): m_t
  return (x * kept).sum(1, /*keepdim=*/true) / kept.sum(1, /*keepdim=*/true);
}

torch::Tensor ClassificationHeadImpl::forward(const torch::Tensor& x, const torch::Tensor& padding) {
  auto pooled_x = model::dropout(pooled(x, padding), dropout_, is_training());  // (B,1,C)
  auto h = model::dropout(torch::tanh(linear(dense, pooled_x)), dropout_, is_training());
  if (readout_multiplier_ != 1.0) h = h * readout_multiplier_;  // MuReadout
  return linear(out_proj, h);
}

EncoderOnlyImpl::EncoderOnlyImpl(const ModelConfig& config) : ModelImpl(config) {
  const auto& c = this->config();
  encoder = register_module("encoder", Encoder(c));
  if (c.classifier()) {
    classification_head = register_module("classification_head", ClassificationHead(c));
    return;
  }
  lm_head = register_module("lm_head",
                            MaskedLmHead(c, c.share == SharedEmbeddings::kNone ? nullptr : encoder->embed_tokens));
}

torch::Tensor EncoderOnlyImpl::forward(const torch::Tensor& tokens, const torch::Tensor& segments) {
  auto guard = precision_guard();
  auto encoded = encoder(tokens, segments);
  return classification_head ? classification_head(encoded.out, encoded.padding_mask) : lm_head(encoded.out);
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
  if (config().share == SharedEmbeddings::kNone || config().classifier()) return {};
  return {{"lm_head.weight", "encoder.embed_tokens.weight"}};
}

nlohmann::json EncoderOnlyImpl::manifest() const {
  auto j = common_manifest();
  j["mask_token"] = mask_token(config());
  if (config().classifier()) j["classes"] = config().classes;
  return j;
}

bool is_classification_head_parameter(const std::string& name) {
  return name.rfind(kClassificationHeadPrefix, 0) == 0;
}

ClassifierFromTrained classifier_from(const EncoderOnly& trained, int64_t classes, ClassifierPooling pooling,
                                      uint64_t seed) {
  auto config = trained->config();
  const bool keeps_head = config.classes == classes;
  config.classes = classes;
  config.pooling = pooling;
  ClassifierFromTrained out{EncoderOnly(config), {}, {}, {}};
  torch::NoGradGuard no_grad;
  const auto from_parameters = trained->named_parameters(), from_buffers = trained->named_buffers();
  for (auto& item : out.model->named_parameters()) {
    const auto& name = item.key();
    const auto* source = from_parameters.find(name);
    if (!source || (!keeps_head && is_classification_head_parameter(name))) continue;
    item.value().copy_(*source);
    out.copied.push_back(name);
  }
  for (auto& item : out.model->named_buffers())  // Admin's omegas and the like
    if (const auto* source = from_buffers.find(item.key())) item.value().copy_(*source);
  if (!keeps_head) {
    torch::manual_seed(seed);
    init_classification_head(*out.model->classification_head, config);
    for (const auto& item : out.model->classification_head->named_parameters())
      out.initialised.push_back(kClassificationHeadPrefix + item.key());
  }
  const auto now = out.model->named_parameters();
  for (const auto& item : from_parameters)
    if (!now.find(item.key())) out.dropped.push_back(item.key());
  return out;
}

EncoderOnly as_encoder_only(const Model& model, const std::string& what) {
  if (auto mlm = std::dynamic_pointer_cast<EncoderOnlyImpl>(model.ptr())) return EncoderOnly(mlm);
  throw std::invalid_argument(what + " needs an " + std::string(kEncoderOnly) + " model, not " + model->kind());
}

}  // namespace normlab::model
