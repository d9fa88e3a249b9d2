#include "model/stacking.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/decoder_only.h"
#include "model/encoder_only.h"
#include "model/init.h"
#include "model/scheme_constants.h"

namespace normlab::model {
namespace {

const std::map<AddedLayerInit, std::string>& init_names() {
  static const std::map<AddedLayerInit, std::string> names = {
      {AddedLayerInit::kXavier, "xavier"},
      {AddedLayerInit::kTFixup, "t-fixup"},
      {AddedLayerInit::kDtFixup, "dt-fixup"},
      {AddedLayerInit::kDtFixupPostLn, "dt-fixup-postln"}};
  return names;
}

bool is_dt_fixup(AddedLayerInit v) { return v == AddedLayerInit::kDtFixup || v == AddedLayerInit::kDtFixupPostLn; }

// The index K of "<stack>.layers.K." at the start of `name`, or -1.
int64_t layer_index(const std::string& name, const std::string& stack) {
  const std::string prefix = stack + ".layers.";
  if (name.rfind(prefix, 0) != 0) return -1;
  const auto end = name.find('.', prefix.size());
  if (end == std::string::npos) return -1;
  return std::stoll(name.substr(prefix.size(), end - prefix.size()));
}

// The largest row norm of x (B,T,C) over the tokens that are not padding in `tokens` (B,T).
double max_token_norm(const torch::Tensor& x, const torch::Tensor& tokens) {
  const auto norms = x.detach().to(torch::kDouble).norm(2, -1).masked_fill(tokens.eq(kPad), 0.0);
  return norms.max().item<double>();
}

// Runs `forward` on each batch in eval mode without gradients; restores the training mode.
template <typename F>
void over_batches(Model model, const std::vector<data::Batch>& batches, F forward) {
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  for (const auto& b : batches) forward(b);
  model->train(was_training);
}

// The largest token norm of `block`'s output over `batches`, each run by forward(batch, tokens,
// mu), which sets the tokens whose padding the block's output has and may raise mu itself.
template <typename F>
double max_block_output_norm(Model model, ResidualBlock& block, const std::vector<data::Batch>& batches, F forward) {
  double mu = 0.0;
  torch::Tensor tokens;
  block.set_observer([&](const char* what, const torch::Tensor& x) {
    if (std::strcmp(what, "output") == 0) mu = std::max(mu, max_token_norm(x, tokens));
  });
  over_batches(model, batches, [&](const data::Batch& b) { forward(b, tokens, mu); });
  block.set_observer(nullptr);
  return mu;
}

// The layer lists of a model's stacks (null where the kind has none).
struct StackLayers {
  torch::nn::ModuleList encoder{nullptr}, decoder{nullptr};
};

StackLayers stack_layers(const Model& m) {
  if (auto ed = std::dynamic_pointer_cast<Seq2SeqImpl>(m.ptr())) return {ed->encoder->layers, ed->decoder->layers};
  if (auto eo = std::dynamic_pointer_cast<EncoderOnlyImpl>(m.ptr())) return {eo->encoder->layers, nullptr};
  return {nullptr, as_decoder_only(m, "layers added by --init-from")->decoder->layers};
}

// A single-stack model's largest token norm at the input of its first added layer (the output of
// its trained layers) over `batches`: DT-Fixup's mu (the authors': RoBERTa's encoder output).
double max_single_stack_input_norm(Model& model, int64_t trained_layers, const std::vector<data::Batch>& batches) {
  auto layers = stack_layers(model);
  const bool encoder = static_cast<bool>(layers.encoder);
  auto list = encoder ? layers.encoder : layers.decoder;
  if (trained_layers < 1 || trained_layers >= static_cast<int64_t>(list->size())) return 0.0;
  auto& block = encoder ? list[trained_layers - 1]->as<EncoderLayerImpl>()->ffn_block
                        : list[trained_layers - 1]->as<DecoderLayerImpl>()->ffn_block;
  return max_block_output_norm(model, block, batches, [&](const data::Batch& b, torch::Tensor& tokens, double&) {
    tokens = encoder ? b.src : b.prev_output_tokens;
    model->forward(b);
  });
}

}  // namespace

std::string to_string(AddedLayerInit v) { return init_names().at(v); }

AddedLayerInit parse_added_layer_init(const std::string& s, const std::string& option) {
  for (const auto& [v, name] : init_names())
    if (name == s) return v;
  throw std::invalid_argument(option + ": unknown value '" + s +
                              "' for layers added by --init-from (choose xavier|t-fixup|dt-fixup|dt-fixup-postln)");
}

bool added_layers_only_init(const std::string& name) {
  for (const auto& [v, n] : init_names())
    if (n == name) return is_dt_fixup(v);  // xavier and t-fixup are fresh models' --init too
  return false;
}

std::vector<std::string> added_count_problems(const AddedLayers& added) {
  std::vector<std::string> out;
  if (added.encoder < 0) out.push_back("--add-encoder-layers must be >= 0, got " + std::to_string(added.encoder));
  if (added.decoder < 0) out.push_back("--add-decoder-layers must be >= 0, got " + std::to_string(added.decoder));
  return out;
}

std::vector<std::string> added_layer_problems(const ModelConfig& trained, const AddedLayers& added) {
  auto out = added_count_problems(added);
  if (!trained.has_encoder() && added.encoder > 0)
    out.push_back("--add-encoder-layers: a " + trained.kind + " model has no encoder (its layers are the decoder's: "
                  "--add-decoder-layers)");
  if (!trained.has_decoder() && added.decoder > 0)
    out.push_back("--add-decoder-layers: an " + trained.kind + " model has no decoder (its layers are the encoder's: "
                  "--add-encoder-layers)");
  if (trained.classifier() && (added.encoder > 0 || added.decoder > 0))
    out.push_back("layers are added to a masked LM's encoder, not to a classifier's (add them, then fine-tune)");
  const auto& s = trained.scheme;
  const bool grows = added.encoder > 0 || added.decoder > 0;
  if (grows && s.norm == NormPlacement::kMix)
    out.push_back("layers cannot be added to a Mix-LN model: which layers are Post-LN depends on the depth");
  if (grows && s.residual != ResidualForm::kPlain)
    out.push_back("layers can be added to models with the plain residual only (the checkpoint's is " +
                  to_string(s.residual) + ": its constants or profile depend on the depth)");
  if (grows && trained.parametrisation == Parametrisation::kUmup)
    out.push_back("layers cannot be added to a --parametrisation u-mup model: its residual weights tau and the "
                  "layers' lr depend on the depth (model/unit_scaling.h)");
  // DT-Fixup's divisor grows with mu, the norm of C-dimensional inputs (about sqrt(C)), where muP fixes a hidden
  // weight's variance at 1/fan_in (Yang et al. 2021, Table 3): no width rule makes the two agree.
  if (is_dt_fixup(added.init) && trained.parametrisation == Parametrisation::kMup)
    out.push_back("--init " + to_string(added.init) + ": DT-Fixup's scale depends on the width through mu (a norm over C "
                  "dimensions), which --parametrisation mup's init does not allow");
  if (is_dt_fixup(added.init) && s.norm != NormPlacement::kPost)
    out.push_back("--init " + to_string(added.init) +
                  ": DT-Fixup's layers go on a Post-LN model's output (the authors' on RoBERTa's); the "
                  "checkpoint's norm is " + to_string(s.norm));
  for (auto [count, free, stack] : {std::tuple{added.encoder, trained.norm_free_encoder_layers, "encoder"},
                                    std::tuple{added.decoder, trained.norm_free_decoder_layers, "decoder"}})
    if (count > 0 && free > 0 && added.init != AddedLayerInit::kDtFixup)
      out.push_back("--init " + to_string(added.init) + ": the checkpoint's " + stack + " ends in " +
                    std::to_string(free) + " layers without norms (dt-fixup's); only --init dt-fixup adds more");
  return out;
}

ModelConfig grown_config(const ModelConfig& trained, const AddedLayers& added) {
  auto c = trained;
  c.encoder_layers += added.encoder;
  c.decoder_layers += added.decoder;
  if (added.init == AddedLayerInit::kDtFixup) {  // BorealisAI/DT-Fixup rat_encoders.py:79-81: use_lnorm=not dt_fix
    c.norm_free_encoder_layers += added.encoder;
    c.norm_free_decoder_layers += added.decoder;
  }
  return c;
}

bool is_added_parameter(const std::string& name, const ModelConfig& trained) {
  return layer_index(name, "encoder") >= trained.encoder_layers ||
         layer_index(name, "decoder") >= trained.decoder_layers;
}

double dt_fixup_divisor(double mu, double layers) { return std::sqrt(layers * (4 * mu * mu + 2 * mu + 2)); }

void to_json(nlohmann::json& j, const StackingReport& r) {
  j = {{"mu_encoder", r.mu_encoder},           {"divisor_encoder", r.divisor_encoder},
       {"mu_decoder", r.mu_decoder},           {"divisor_decoder", r.divisor_decoder},
       {"t_fixup_encoder", r.t_fixup_encoder}, {"t_fixup_decoder", r.t_fixup_decoder}};
}

double max_encoder_input_norm(Seq2Seq& model, int64_t trained_layers, const std::vector<data::Batch>& batches) {
  if (trained_layers < 1 || trained_layers >= static_cast<int64_t>(model->encoder->layers->size())) return 0.0;
  return max_block_output_norm(model, model->encoder->layers[trained_layers - 1]->as<EncoderLayerImpl>()->ffn_block,
                               batches, [&](const data::Batch& b, torch::Tensor& tokens, double&) {
                                 tokens = b.src;
                                 model->encoder->forward(b.src);
                               });
}

double max_decoder_input_norm(Seq2Seq& model, int64_t trained_layers, const std::vector<data::Batch>& batches) {
  if (trained_layers < 1 || trained_layers >= static_cast<int64_t>(model->decoder->layers->size())) return 0.0;
  return max_block_output_norm(model, model->decoder->layers[trained_layers - 1]->as<DecoderLayerImpl>()->ffn_block,
                               batches, [&](const data::Batch& b, torch::Tensor& tokens, double& mu) {
                                 const auto encoder = model->encoder->forward(b.src);
                                 mu = std::max(mu, max_token_norm(encoder.out, b.src));  // what the cross-attention reads
                                 tokens = b.prev_output_tokens;
                                 model->decoder->forward(b.prev_output_tokens, encoder);
                               });
}

GrownModel add_layers(const Model& trained, const AddedLayers& added, uint64_t seed,
                      const std::vector<data::Batch>& batches) {
  const auto& old = trained->config();
  const auto problems = added_layer_problems(old, added);
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    throw std::invalid_argument(all);
  }
  GrownModel out{create_model(grown_config(old, added)), {}};
  auto& net = out.model;
  net->to(trained->device());
  auto layers = stack_layers(net);
  std::map<std::string, torch::Tensor> before;
  for (const auto& p : trained->named_parameters()) before[p.key()] = p.value();
  torch::manual_seed(seed);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : net->named_parameters()) {
      const auto it = before.find(p.key());
      if (it != before.end())
        p.value().copy_(it->second);
      else if (!is_added_parameter(p.key(), old))
        throw std::logic_error("add_layers: parameter " + p.key() + " is neither trained nor added");
    }
    for (int64_t i = old.encoder_layers; i < old.encoder_layers + added.encoder; ++i)
      init_layer_xavier(*layers.encoder[i]->as<EncoderLayerImpl>());
    for (int64_t i = old.decoder_layers; i < old.decoder_layers + added.decoder; ++i)
      init_layer_xavier(*layers.decoder[i]->as<DecoderLayerImpl>());
    // The norms of the added layers, where they have them, start at weight 1, bias 0 (their
    // constructor's values).
  }
  auto scale = [&](bool decoder, double factor) {
    const int64_t first = decoder ? old.decoder_layers : old.encoder_layers;
    const int64_t count = decoder ? added.decoder : added.encoder;
    for (int64_t i = first; i < first + count; ++i) {
      if (decoder)
        scale_value_and_ffn(*layers.decoder[i]->as<DecoderLayerImpl>(), factor);
      else
        scale_value_and_ffn(*layers.encoder[i]->as<EncoderLayerImpl>(), factor);
    }
  };
  auto& r = out.report;
  const bool single = old.single_stack();
  if (added.init == AddedLayerInit::kTFixup) {
    // A single stack's added layers get the single-stack factor (6N)^(-1/4) (schemes.md).
    if (added.encoder > 0)
      scale(false, r.t_fixup_encoder = single ? t_fixup_single_stack_factor(added.encoder)
                                              : t_fixup_encoder_factor(added.encoder));
    if (added.decoder > 0)
      scale(true, r.t_fixup_decoder = single ? t_fixup_single_stack_factor(added.decoder)
                                             : t_fixup_decoder_factor(added.decoder));
  } else if (is_dt_fixup(added.init)) {
    // The authors (optimizers.py:52-68, trainer/base.py:60-69) divide the weights of v, out, fc1
    // and fc2 of their N layers by sqrt(N (4 mu^2 + 2 mu + 2)); an encoder-decoder's decoder
    // layer has 3 residual sub-layers against the encoder's 2, so its count is 1.5 M (the same
    // bound per sub-layer); a decoder-only model's layers have 2, as the encoder's.
    std::optional<Seq2Seq> ed;
    if (!single) ed = as_encoder_decoder(net, "add_layers");
    if (added.encoder > 0) {
      r.mu_encoder = single ? max_single_stack_input_norm(net, old.encoder_layers, batches)
                            : max_encoder_input_norm(*ed, old.encoder_layers, batches);
      r.divisor_encoder = dt_fixup_divisor(r.mu_encoder, static_cast<double>(added.encoder));
      scale(false, 1.0 / r.divisor_encoder);
    }
    if (added.decoder > 0) {
      r.mu_decoder = single ? max_single_stack_input_norm(net, old.decoder_layers, batches)
                            : max_decoder_input_norm(*ed, old.decoder_layers, batches);
      r.divisor_decoder = dt_fixup_divisor(r.mu_decoder, (single ? 1.0 : 1.5) * static_cast<double>(added.decoder));
      scale(true, 1.0 / r.divisor_decoder);
    }
  }
  return out;
}

}  // namespace normlab::model
