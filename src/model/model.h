// The model-kind interface and its registry (CTranslate2's ModelFactory: its
// sequence-to-sequence and language models are kinds behind one interface that share the
// layers of layers.h). Training, the analyses, export and checkpoints talk to `Model`; a kind
// says how it reads a batch (data/batch.h), how it initialises itself and where its residual
// blocks and attentions sit (the instruments' sites). Decoding stays with the kinds that
// decode (decode/beam_search.h takes the encoder-decoder). docs/architecture.md, "Model kinds".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "data/batch.h"
#include "model/attention.h"
#include "model/config.h"
#include "model/norm.h"
#include "model/precision.h"
#include "model/residual_block.h"

namespace normlab::model {

// One layer as the instruments see it: its residual blocks and attentions in forward order,
// each by its fairseq name (self_attn | encoder_attn | ffn).
struct LayerView {
  std::vector<std::pair<std::string, ResidualBlock*>> blocks;
  std::vector<std::pair<std::string, MultiheadAttention>> attentions;
};

// One stack of layers (its name is the prefix of its parameters: encoder | decoder).
struct StackView {
  std::string name;
  std::vector<LayerView> layers;
  Norm final_norm{nullptr};  // the stack's last norm (has_final_norm()), else null
  // The batch's tokens whose positions the stack's hidden states have (their padding is the
  // stack's padding): &Batch::src for an encoder, &Batch::prev_output_tokens for a decoder.
  torch::Tensor data::Batch::*tokens = nullptr;
};

class ModelImpl : public torch::nn::Module {
 public:
  explicit ModelImpl(const ModelConfig& config);  // validates config
  ~ModelImpl() override = default;

  // The batch's logits (B,T,V) at its target's positions, the batch's tensors moved to the
  // device of the parameters; in precision() (the loss takes bf16/fp16 logits to fp32), in the
  // current training mode (dropout) and autograd mode.
  virtual torch::Tensor forward(const data::Batch& batch) = 0;

  // Each stack's output as fairseq's module returns it, by stack name (stacks()' names): by
  // default forward()'s logits under the one stack's name (a decoder-only model's decoder,
  // RoBERTa's encoder with its LM head); an encoder-decoder's encoder states (B,S,C) and decoder
  // logits (B,T,V). Same modes as forward().
  virtual std::map<std::string, torch::Tensor> stack_outputs(const data::Batch& batch);

  // Every parameter as config().scheme.init says (REFERENCE §1), under torch's generator as
  // it stands (initialize() seeds it). `profile`: a batch for the initialisations that look
  // at data (Admin's profiling pass); null when there is none.
  virtual void init_parameters(const data::Batch* profile) = 0;

  // The stacks in forward order (block_sites, traces, probes).
  virtual std::vector<StackView> stacks() = 0;

  // fairseq names of shared tables that are not stored separately: alias -> stored name.
  virtual std::map<std::string, std::string> tied_aliases() const = 0;

  // What another implementation needs besides the configuration to run the kind's forward
  // pass (export.h's manifest): its scheme constants, special tokens, position offset.
  virtual nlohmann::json manifest() const = 0;

  // What manifest() holds for every kind: "scheme" (norm, residual, init, norm_kind,
  // mix_ln_alpha, ln_scaling, qk_norm, dyt_alpha_init, and each stack's DeepNorm alpha:
  // encoder_alpha with an encoder, decoder_alpha with a decoder; 1 unless DeepNorm), "special_tokens",
  // "position_offset", "embed_scale" (sqrt(C); width.h's embedding_scale) and "layer_norm_eps" (LayerNorm and RMSNorm).
  nlohmann::json common_manifest() const;

  const ModelConfig& config() const { return config_; }
  const std::string& kind() const { return config_.kind; }

  // Mixed precision of forward() and of decoding (precision.h): a run-time setting, not part
  // of the configuration or the checkpoint (the weights stay fp32). Default fp32.
  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }
  // A guard for precision() on the device of the weights, for code that calls the layers
  // directly (beam search, probes).
  PrecisionGuard precision_guard() const;
  c10::Device device() const;  // of the parameters

 private:
  ModelConfig config_;
  Precision precision_ = Precision::kFp32;
};

// A shared handle on a model of any kind, as TORCH_MODULE's holders are: empty (nullptr), or
// from a kind's holder (model::Seq2Seq) or shared pointer.
class Model : public torch::nn::ModuleHolder<ModelImpl> {
 public:
  Model(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT(google-explicit-constructor)
  template <typename Kind, typename = std::enable_if_t<std::is_base_of_v<ModelImpl, Kind>>>
  Model(std::shared_ptr<Kind> impl)  // NOLINT(google-explicit-constructor)
      : ModuleHolder(std::shared_ptr<ModelImpl>(std::move(impl))) {}
  template <typename Kind, typename = std::enable_if_t<std::is_base_of_v<ModelImpl, Kind>>>
  Model(const torch::nn::ModuleHolder<Kind>& holder)  // NOLINT(google-explicit-constructor)
      : ModuleHolder(std::shared_ptr<ModelImpl>(holder.ptr())) {}
};

// The registry of model kinds, by ModelConfig::kind. The encoder-decoder (seq2seq.h) is built in.
using ModelFactory = std::function<Model(const ModelConfig&)>;
// Adds a kind (a test's, a new model's). Throws std::invalid_argument when the name is empty
// or taken.
void register_model_kind(const std::string& kind, ModelFactory factory);
std::vector<std::string> model_kinds();  // in registration order
std::string model_kind_choices();        // "encoder-decoder|..."
// A new model of config.kind with fresh (constructor) parameters. Throws std::invalid_argument
// naming the kind and the choices for an unknown kind, and config's problems.
Model create_model(const ModelConfig& config);

// Seeds torch's generator with `seed`, then model->init_parameters(profile).
void initialize(Model model, uint64_t seed, const data::Batch* profile = nullptr);

}  // namespace normlab::model
