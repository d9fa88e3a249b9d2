// The encoder-only masked language model, the third model kind (model.h; registered as
// "encoder-only"): BERT (Devlin et al. 2019) as fairseq's RoBERTa builds it, i.e. the
// encoder-decoder's encoder with segment (token type) vectors and a norm on the embedding when
// the form asks (--form bert), then RoBERTa's LM head: dense, activation, norm, the output
// projection tied to the token table (--share decoder, the default) plus a bias. One vocabulary
// whose last id is <mask> (config.h's mask_token). docs/schemes.md, "Model kinds".
#pragma once

#include <map>
#include <string>
#include <vector>

#include <torch/nn/modules/linear.h>

#include "model/config.h"
#include "model/layers.h"
#include "model/model.h"

namespace normlab::model {

// RoBERTa's RobertaLMHead (fairseq names): logits = norm(act(dense(x))) W^T + bias, W the token
// table when shared, else its own `weight`; under muP norm(...) times 1/m (model/width.h).
class MaskedLmHeadImpl : public torch::nn::Module {
 public:
  MaskedLmHeadImpl(const ModelConfig& config, torch::nn::Embedding tied);  // tied: null with --share none
  torch::Tensor forward(const torch::Tensor& x);                           // (B,S,C) -> (B,S,V)
  torch::Tensor output_weight() const;                                     // (V,C)

  torch::nn::Linear dense{nullptr};
  Norm layer_norm{nullptr};
  torch::Tensor weight;  // own output projection (--share none), else undefined
  torch::Tensor bias;    // (V)

 private:
  torch::nn::Embedding tied_;
  Activation activation_;
  double readout_multiplier_;  // model/width.h (MuSharedReadout, or MuReadout with --share none)
};
TORCH_MODULE(MaskedLmHead);

// RoBERTa's RobertaClassificationHead (fairseq's roberta/model.py; Hugging Face's is the same
// function in evaluation mode): logits = out_proj(dropout(tanh(dense(dropout(x_0))))), x_0 the
// encoder's output at the first position (<s>, BERT's [CLS]); dropout p the model's --dropout
// (Hugging Face's classifier_dropout default, hidden_dropout_prob). With ClassifierPooling::kMean
// x_0 is instead the mean over the non-padding positions, sum_t m_t x_t / sum_t m_t (Hugging Face
// ModernBERT's classifier_pooling "mean", sentence-transformers' mean pooling), the rest the same.
class ClassificationHeadImpl : public torch::nn::Module {
 public:
  explicit ClassificationHeadImpl(const ModelConfig& config);
  // x (B,S,C), padding (B,S) bool, true at padding -> (B,1,K)
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding);

  torch::nn::Linear dense{nullptr};     // C x C
  torch::nn::Linear out_proj{nullptr};  // K x C

 private:
  torch::Tensor pooled(const torch::Tensor& x, const torch::Tensor& padding) const;  // (B,1,C)

  ClassifierPooling pooling_;
  double dropout_;
  double readout_multiplier_;  // model/width.h (out_proj is a MuReadout)
};
TORCH_MODULE(ClassificationHead);

class EncoderOnlyImpl : public ModelImpl {
 public:
  explicit EncoderOnlyImpl(const ModelConfig& config);  // validates config

  // tokens (B,S) (segments (B,S) or undefined: segment 0) -> logits (B,S,V) at every position, in
  // precision(); every position sees every other non-padding position. A classifier's: (B,1,K).
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& segments);
  // The batch's src and segments (its prev_output_tokens are not read).
  torch::Tensor forward(const data::Batch& batch) override;

  void init_parameters(const data::Batch* profile) override;  // init.h's init_encoder_only
  std::vector<StackView> stacks() override;                  // the encoder (self_attn, ffn)
  std::map<std::string, std::string> tied_aliases() const override;
  // common_manifest() and the <mask> token.
  nlohmann::json manifest() const override;

  Encoder encoder{nullptr};
  MaskedLmHead lm_head{nullptr};                      // null in a classifier
  ClassificationHead classification_head{nullptr};  // config().classifier() only
};
TORCH_MODULE(EncoderOnly);

// A classifier of `classes` classes on a trained encoder-only model (fine-tuning, train
// --init-from): the encoder's parameters copied, the new head initialised as the model's
// scheme initialises one (init.h) under torch's generator seeded by `seed`. A trained masked
// LM's lm_head is left behind; a trained classifier of the same K keeps its head (its pooling
// may change: the head's parameters are the same).
struct ClassifierFromTrained {
  EncoderOnly model{nullptr};
  std::vector<std::string> copied, dropped, initialised;  // parameter names
};
ClassifierFromTrained classifier_from(const EncoderOnly& trained, int64_t classes, ClassifierPooling pooling,
                                      uint64_t seed);

// The stored names of a classifier's head start with this ("classification_head.dense.weight").
inline constexpr const char* kClassificationHeadPrefix = "classification_head.";
// Whether `name` is a parameter of the classification head (new when fine-tuning).
bool is_classification_head_parameter(const std::string& name);

// `model` as an encoder-only model; else std::invalid_argument "WHAT needs an encoder-only model,
// not KIND".
EncoderOnly as_encoder_only(const Model& model, const std::string& what);

}  // namespace normlab::model
