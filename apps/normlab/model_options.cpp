#include "model_options.h"

#include <algorithm>

#include "core/tokens.h"
#include "model/model.h"
#include "model/unit_scaling.h"

namespace normlab::app {

torch::Dtype parse_dtype(const std::string& s) {
  if (s == "float32") return torch::kFloat32;
  if (s == "float64") return torch::kFloat64;
  throw std::invalid_argument("--dtype: unknown value '" + s + "', expected float32|float64");
}

void refuse_model_flags(const std::vector<std::string>& flags, const std::string& source) {
  std::string names;
  for (const auto& flag : flags) names += (names.empty() ? "" : ", ") + flag;
  if (!names.empty()) throw std::invalid_argument(names + ": " + source + "; drop them");
}

CLI::Option* add_classifier_pooling_option(CLI::App& cmd, std::string& value, const std::string& group) {
  return cmd
      .add_option("--classifier-pooling", value,
                  "what a classifier's head reads (--num-classes): cls, the first position <s> (BERT's "
                  "[CLS]; the default), or mean, the mean over the non-padding positions (docs/finetune.md)")
      ->check(CLI::IsMember({"cls", "mean"}))
      ->group(group);
}

std::optional<model::ClassifierPooling> classifier_pooling(const std::string& value) {
  if (value.empty()) return std::nullopt;
  return model::parse_classifier_pooling(value);
}

std::vector<std::string> ModelOptions::given(const std::vector<std::string>& except) const {
  std::vector<std::string> out;
  for (const auto* option : options_)
    if (option->count() > 0 && std::find(except.begin(), except.end(), option->get_name()) == except.end())
      out.push_back(option->get_name());
  return out;
}

void ModelOptions::add_to(CLI::App& cmd, bool vocab_options) {
  const auto before = cmd.get_options().size();
  const std::string g = "Model";
  cmd.add_option("--model-kind", kind_, "the model kind: " + model::model_kind_choices() + " (docs/architecture.md)")
      ->capture_default_str()->group(g);
  std::string schemes;
  for (const auto& name : model::scheme_names()) schemes += (schemes.empty() ? "" : "|") + name;
  cmd.add_option("--scheme", scheme_, schemes)->capture_default_str()->group(g);
  cmd.add_option("--preset", preset_, "iwslt-small|base|big|deep-narrow")
      ->capture_default_str()->group(g);
  cmd.add_option("--norm", norm_, "override the scheme's norm placement: post|pre|peri|mix|none")->group(g);
  cmd.add_option("--norm-kind", norm_kind_, "override the scheme's norm: layernorm|rmsnorm|dyt")->group(g);
  mix_alpha_opt_ = cmd.add_option("--mix-ln-alpha", mix_alpha_,
                                  "--norm mix: Post-LN in the first floor(alpha L) layers of each stack")
                       ->capture_default_str()->group(g);
  cmd.add_flag("--ln-scaling", ln_scaling_, "LayerNorm scaling: layer l's norms x 1/sqrt(l) (--norm pre)")
      ->group(g);
  cmd.add_flag("--qk-norm", qk_norm_, "a norm of the scheme's kind on each head's q and k")->group(g);
  cmd.add_option("--residual", residual_, "override the residual form: plain|admin|rezero|deepnorm")
      ->group(g);
  cmd.add_option("--init", init_,
                 "override the initialisation: xavier|t-fixup|admin-profile|admin-closed-form|"
                 "rezero|deepnorm|gpt2 (train --init-from: the added layers', xavier|t-fixup|dt-fixup|dt-fixup-postln)")
      ->group(g);
  cmd.add_option("--share", share_, "shared embeddings: all|decoder|none")
      ->capture_default_str()->group(g);
  cmd.add_option("--embed-init", embed_init_,
                 "token tables and unshared output projection: normal (N(0, C^-1/2), fairseq)|xavier")
      ->capture_default_str()->group(g);
  cmd.add_option("--form", form_,
                 "architecture form: fairseq (sinusoidal positions, ReLU, tokens x sqrt(C))|gpt2 (learned "
                 "positions, GELU-tanh, tokens unscaled, GPT-2's init for schemes whose init is xavier)")
      ->capture_default_str()->group(g);
  cmd.add_option("--positions", positions_, "override the form's positions: sinusoidal|learned")->group(g);
  cmd.add_option("--activation", activation_, "override the form's FFN activation: relu|gelu|gelu-tanh")->group(g);
  cmd.add_flag("--no-scale-embedding", no_scale_embedding_, "tokens not multiplied by sqrt(C) (fairseq's flag)")
      ->group(g);
  cmd.add_option("--parametrisation", parametrisation_,
                 "how init, multipliers and per-parameter lr scale with width: sp|mup (muP, Yang et al. 2021)|"
                 "u-mup (u-muP, Blake et al. 2024; docs/width.md)")
      ->capture_default_str()->group(g);
  cmd.add_option("--mup-base-width", sizes_.mup_base_width,
                 "--parametrisation mup: the base width C0 at which mup is sp (m = C / C0)")
      ->group(g);
  // u-muP's hyperparameters (Blake et al. 2024, Table 3), each the mult of a unit_scaling function.
  for (const auto& f : model::umup_alpha_fields())
    cmd.add_option(f.option, sizes_.umup.*f.member, std::string("--parametrisation u-mup: ") + f.help + "; default 1")
        ->group(g);
  d_model_ = cmd.add_option("--d-model", sizes_.d_model, "model dimension C")->group(g);
  ffn_dim_ = cmd.add_option("--ffn-dim", sizes_.ffn_dim, "FFN dimension")->group(g);
  heads_ = cmd.add_option("--heads", sizes_.heads, "attention heads")->group(g);
  encoder_layers_ = cmd.add_option("--encoder-layers", sizes_.encoder_layers, "encoder layers")->group(g);
  decoder_layers_ = cmd.add_option("--decoder-layers", sizes_.decoder_layers, "decoder layers")->group(g);
  // One key for both depths, so that a recipe can grid over depth (docs/recipes.md).
  layers_opt_ = cmd.add_option("--layers", layers_, "encoder and decoder layers, both N (decoder-only: its N layers)")
                    ->excludes(encoder_layers_)->excludes(decoder_layers_)->group(g);
  if (vocab_options) {
    cmd.add_option("--vocab-size", vocab_size_,
                   "source and target vocabulary size (special tokens included)")
        ->group(g);
    src_vocab_ = cmd.add_option("--src-vocab-size", sizes_.src_vocab_size, "source vocabulary size")->group(g);
    tgt_vocab_ = cmd.add_option("--tgt-vocab-size", sizes_.tgt_vocab_size, "target vocabulary size")->group(g);
  }
  cmd.add_option("--max-positions", sizes_.max_positions, "longest sentence in tokens")
      ->capture_default_str()->group(g);
  cmd.add_option("--dropout", sizes_.dropout, "dropout on residual branches and embeddings")
      ->capture_default_str()->group(g);
  cmd.add_option("--attention-dropout", sizes_.attention_dropout, "dropout on attention weights")
      ->capture_default_str()->group(g);
  cmd.add_option("--activation-dropout", sizes_.activation_dropout, "dropout after the FFN's activation")
      ->capture_default_str()->group(g);
  cmd.add_option("--rezero-alpha-init", sizes_.rezero_alpha_init,
                 "ReZero's alpha at initialisation (the paper: 0)")
      ->capture_default_str()->group(g);
  cmd.add_option("--num-classes", sizes_.classes,
                 "encoder-only: a classification head of K classes on <s> instead of the masked-LM head "
                 "(docs/finetune.md; train --init-from: on the checkpoint's encoder)")
      ->check(CLI::NonNegativeNumber)->group(g);
  add_classifier_pooling_option(cmd, pooling_, g);
  const auto all = cmd.get_options();
  options_.assign(all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
}

model::SchemeOverrides ModelOptions::scheme_overrides() const {
  model::SchemeOverrides o;
  if (!norm_.empty()) o.norm = model::parse_norm_placement(norm_);
  if (!residual_.empty()) o.residual = model::parse_residual_form(residual_);
  if (!init_.empty()) o.init = model::parse_init_method(init_);
  if (!norm_kind_.empty()) o.norm_kind = model::parse_norm_kind(norm_kind_);
  if (mix_alpha_opt_->count() > 0) o.mix_alpha = mix_alpha_;
  o.ln_scaling = ln_scaling_;
  o.qk_norm = qk_norm_;
  return o;
}

model::ModelConfig ModelOptions::resolve(bool vocab_from_data) const {
  model::ModelConfig c = sizes_;  // dropout, positions, rezero alpha as given (or defaults)
  const auto kinds = model::model_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind_) == kinds.end())
    throw std::invalid_argument("--model-kind: unknown value '" + kind_ + "', expected " + model::model_kind_choices());
  c.kind = kind_;
  model::apply_preset(preset_, c);
  auto override_with = [](CLI::Option* opt, int64_t value, int64_t& field) {
    if (opt->count() > 0) field = value;
  };
  override_with(d_model_, sizes_.d_model, c.d_model);
  override_with(ffn_dim_, sizes_.ffn_dim, c.ffn_dim);
  override_with(heads_, sizes_.heads, c.heads);
  override_with(encoder_layers_, sizes_.encoder_layers, c.encoder_layers);
  override_with(decoder_layers_, sizes_.decoder_layers, c.decoder_layers);
  override_with(layers_opt_, layers_, c.encoder_layers);
  override_with(layers_opt_, layers_, c.decoder_layers);
  // A single-stack model takes the preset's and --layers' depth for its one stack; an explicit
  // --encoder-layers (--decoder-layers) it has no use for is kept, for ModelConfig::problems() to refuse.
  if (!c.has_encoder() && encoder_layers_->count() == 0) c.encoder_layers = 0;
  if (!c.has_decoder() && decoder_layers_->count() == 0) c.decoder_layers = 0;
  if (vocab_from_data) {
    c.src_vocab_size = c.tgt_vocab_size = kNumSpecialTokens + 1;  // any valid size, to validate the rest
  } else {
    c.src_vocab_size = src_vocab_->count() > 0 ? sizes_.src_vocab_size : vocab_size_;
    c.tgt_vocab_size = tgt_vocab_->count() > 0 ? sizes_.tgt_vocab_size : vocab_size_;
  }
  c.share = model::parse_shared_embeddings(share_);
  c.embed_init = model::parse_embedding_init(embed_init_);
  c.scheme = scheme_overrides().apply(model::scheme_by_name(scheme_));
  model::apply_form(form_, c);
  if (!init_.empty()) c.scheme.init = model::parse_init_method(init_);  // an explicit --init wins over the form's
  if (!positions_.empty()) c.positions = model::parse_position_embedding(positions_);
  if (!activation_.empty()) c.activation = model::parse_activation(activation_);
  if (no_scale_embedding_) c.scale_embedding = false;
  c.parametrisation = model::parse_parametrisation(parametrisation_);
  c.pooling = pooling().value_or(model::ClassifierPooling::kCls);
  c.validate();
  if (vocab_from_data) c.src_vocab_size = c.tgt_vocab_size = 0;
  return c;
}

}  // namespace normlab::app
