#include "model/init.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

#include "core/tokens.h"
#include "model/scheme_constants.h"
#include "model/unit_scaling.h"
#include "model/width.h"

namespace normlab::model {
namespace {

namespace init = torch::nn::init;

constexpr double kGpt2Std = 0.02;  // GPT-2's initializer_range

void xavier(const torch::nn::Linear& linear, double gain) {
  init::xavier_uniform_(linear->weight, gain);
  if (linear->bias.defined()) init::zeros_(linear->bias);
}

// fairseq: q, k, v were one fused matrix, hence gain 1/sqrt(2); out_proj gain 1.
// DeepNorm (REFERENCE §1): q, k gain 1; v, out_proj gain beta.
void init_attention(MultiheadAttention& attn, InitMethod method, double beta) {
  const bool deepnorm = method == InitMethod::kDeepNorm;
  const double qk_gain = deepnorm ? 1.0 : 1.0 / std::sqrt(2.0);
  xavier(attn->q_proj, qk_gain);
  xavier(attn->k_proj, qk_gain);
  xavier(attn->v_proj, deepnorm ? beta : qk_gain);
  xavier(attn->out_proj, deepnorm ? beta : 1.0);
}

void scale_value_and_output(MultiheadAttention& attn, double factor) {
  attn->v_proj->weight.mul_(factor * std::sqrt(2.0));
  attn->out_proj->weight.mul_(factor);
}

// N(0, C^-1/2) (REFERENCE §1), or Xavier-uniform U(±sqrt(6 / (V + C))) with --embed-init
// xavier; token tables also get a zero padding row, an unshared output projection does not
// (fairseq).
void init_embedding(torch::Tensor weight, bool zero_padding_row, EmbeddingInit how) {
  const auto d = static_cast<double>(weight.size(1));
  if (how == EmbeddingInit::kXavier)
    init::xavier_uniform_(weight);
  else
    init::normal_(weight, 0.0, std::pow(d, -0.5));
  if (zero_padding_row) weight[kPad].zero_();
}

void fill_omegas(const std::vector<const ResidualBlock*>& blocks, double omega) {
  for (const auto* b : blocks)
    if (b->omega().defined()) b->omega().fill_(omega);
}

// GPT-2's and BERT's initialisations draw every matrix and table from N(0, 0.02).
bool normal_002(const ModelConfig& c) { return c.scheme.init == InitMethod::kGpt2 || c.scheme.init == InitMethod::kBert; }

void normal_linear(const torch::nn::Linear& linear, double std) {
  init::normal_(linear->weight, 0.0, std);
  if (linear->bias.defined()) init::zeros_(linear->bias);
}

// Learned positions (fairseq's LearnedPositionalEmbedding: N(0, C^-1/2); GPT-2's wpe and BERT's
// position embeddings: N(0, 0.02)). Segment tables the same way.
void init_positions(const torch::nn::Embedding& positions, const ModelConfig& c) {
  if (!positions) return;
  if (normal_002(c))
    init::normal_(positions->weight, 0.0, kGpt2Std);
  else
    init_embedding(positions->weight, false, c.embed_init);
}

// GPT-2's initialisation (Hugging Face GPT2PreTrainedModel._init_weights; nanoGPT's
// _init_weights and its c_proj rule): every matrix and table N(0, 0.02), biases 0, and the
// two projections that end a residual branch (attention's c_proj = out_proj, the MLP's c_proj =
// fc2) N(0, 0.02 / sqrt(2 n_layer)), "to account for the accumulation on the residual path".
void init_decoder_gpt2(Decoder& dec, const ModelConfig& c) {
  const double branch_std = kGpt2Std / std::sqrt(2.0 * static_cast<double>(c.decoder_layers));
  for (const auto& m : *dec->layers) {
    auto* layer = m->as<DecoderLayerImpl>();
    auto& attn = layer->self_attn;
    for (const auto* linear : {&attn->q_proj, &attn->k_proj, &attn->v_proj}) normal_linear(*linear, kGpt2Std);
    normal_linear(attn->out_proj, branch_std);
    normal_linear(layer->fc1, kGpt2Std);
    normal_linear(layer->fc2, branch_std);
  }
  init::normal_(dec->embed_tokens->weight, 0.0, kGpt2Std);
  dec->embed_tokens->weight[kPad].zero_();  // normlab's padding row (GPT-2 has no padding token)
  if (dec->output_projection) init::normal_(dec->output_projection->weight, 0.0, kGpt2Std);
}

// BERT's initialisation (Hugging Face BertPreTrainedModel._init_weights): every Linear N(0, 0.02)
// with zero bias, every table N(0, 0.02) with a zero padding row; norms at 1 and 0.
void init_encoder_bert(Encoder& enc, const ModelConfig& c) {
  for (const auto& m : *enc->layers) {
    auto* layer = m->as<EncoderLayerImpl>();
    auto& attn = layer->self_attn;
    for (const auto* linear : {&attn->q_proj, &attn->k_proj, &attn->v_proj, &attn->out_proj})
      normal_linear(*linear, kGpt2Std);
    normal_linear(layer->fc1, kGpt2Std);
    normal_linear(layer->fc2, kGpt2Std);
  }
  init::normal_(enc->embed_tokens->weight, 0.0, kGpt2Std);
  enc->embed_tokens->weight[kPad].zero_();
  init_positions(enc->embed_positions, c);
}

void init_encoder(Encoder& enc, const ModelConfig& c) {
  const auto method = c.scheme.init;
  const auto k = stack_constants(c, /*decoder=*/false);
  for (const auto& m : *enc->layers) {
    auto* layer = m->as<EncoderLayerImpl>();
    init_attention(layer->self_attn, method, k.deepnorm_beta);
    xavier(layer->fc1, method == InitMethod::kDeepNorm ? k.deepnorm_beta : 1.0);
    xavier(layer->fc2, method == InitMethod::kDeepNorm ? k.deepnorm_beta : 1.0);
    if (method == InitMethod::kTFixup) scale_value_and_ffn(*layer, k.t_fixup_factor);
    if (layer->rezero_alpha.defined()) layer->rezero_alpha.fill_(c.rezero_alpha_init);
    if (method == InitMethod::kAdminClosedForm)
      fill_omegas({&layer->self_attn_block, &layer->ffn_block}, admin_closed_form_omega(k.residual_blocks));
  }
  init_embedding(enc->embed_tokens->weight, true, c.embed_init);
  if (method == InitMethod::kTFixup) enc->embed_tokens->weight.mul_(k.t_fixup_embedding);
  init_positions(enc->embed_positions, c);
}

// The decoder of either kind (its constants from stack_constants: with or without an encoder).
void init_decoder(Decoder& dec, const ModelConfig& c) {
  const auto method = c.scheme.init;
  const auto k = stack_constants(c, /*decoder=*/true);
  for (const auto& m : *dec->layers) {
    auto* layer = m->as<DecoderLayerImpl>();
    init_attention(layer->self_attn, method, k.deepnorm_beta);
    if (layer->encoder_attn) init_attention(layer->encoder_attn, method, k.deepnorm_beta);
    xavier(layer->fc1, method == InitMethod::kDeepNorm ? k.deepnorm_beta : 1.0);
    xavier(layer->fc2, method == InitMethod::kDeepNorm ? k.deepnorm_beta : 1.0);
    if (method == InitMethod::kTFixup) scale_value_and_ffn(*layer, k.t_fixup_factor);
    if (layer->rezero_alpha.defined()) layer->rezero_alpha.fill_(c.rezero_alpha_init);
    if (method == InitMethod::kAdminClosedForm)
      fill_omegas({&layer->self_attn_block, &layer->encoder_attn_block, &layer->ffn_block},
                  admin_closed_form_omega(k.residual_blocks));
  }
  // With all embeddings shared, the encoder initialised (and T-Fixup scaled) the one table.
  if (c.share != SharedEmbeddings::kAll) {
    init_embedding(dec->embed_tokens->weight, true, c.embed_init);
    if (method == InitMethod::kTFixup) dec->embed_tokens->weight.mul_(k.t_fixup_embedding);
  }
  if (dec->output_projection) init_embedding(dec->output_projection->weight, false, c.embed_init);
  init_positions(dec->embed_positions, c);
}

// Admin profiling (REFERENCE §1): one training-mode forward (dropout on, as in the first training
// step of Transformer-Clinic), without autograd, while each stack's profiler is active.
void run_admin_profile(ModelImpl& model, const std::vector<AdminProfile*>& profiles, const data::Batch& batch) {
  if (model.config().scheme.residual != ResidualForm::kAdmin)
    throw std::invalid_argument("Admin profiling needs --residual admin");
  const bool was_training = model.is_training();
  model.train();
  for (auto* profile : profiles) *profile = AdminProfile{true, 1.0};
  {
    torch::NoGradGuard no_grad;
    model.forward(batch);
  }
  for (auto* profile : profiles) profile->active = false;
  model.train(was_training);
}

// The tables and readouts that init_embedding / init_positions draw (N(0, C^-1/2) or Xavier by
// --embed-init); every other matrix is a Linear drawn Xavier-uniform (times a scheme's constant).
bool drawn_as_table(const std::string& name) {
  for (const char* suffix : {"embed_tokens.weight", "embed_positions.weight", "segment_embeddings.weight",
                             "output_projection.weight", "lm_head.weight"}) {
    const std::string s = suffix;
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

// std(base shape) / std(shape) of the sp rule that drew the matrix `name` (out x in).
double base_std_ratio(const std::string& name, const std::vector<int64_t>& shape, const std::vector<int64_t>& base,
                      const ModelConfig& c) {
  const auto fan_in = static_cast<double>(shape[1]), fan_out = static_cast<double>(shape[0]);
  const auto base_in = static_cast<double>(base[1]), base_out = static_cast<double>(base[0]);
  if (normal_002(c)) return 1.0;  // N(0, 0.02) (and GPT-2's 0.02 / sqrt(2N)): no fan in it
  if (drawn_as_table(name) && c.embed_init == EmbeddingInit::kNormal) return std::sqrt(fan_in / base_in);  // C^-1/2
  return std::sqrt((fan_in + fan_out) / (base_in + base_out));  // Xavier: sqrt(2 / (fan_in + fan_out))
}

// muP's initialisation (Yang et al. 2021, Table 3; mup/init.py): each matrix as the sp rule draws
// it at the base model's shape, its std divided by sqrt(m) when both dimensions are infinite (a
// hidden weight: variance 1/fan_in). As mup's set_base_shapes(rescale_params=True), a rescaling of
// the sp draw; vectors (biases, norms, omegas) keep their width-free constants. Nothing under sp.
void rescale_for_mup(torch::nn::Module& module, const std::string& prefix, const ModelConfig& c) {
  if (c.parametrisation != Parametrisation::kMup) return;
  const auto base = base_shapes(c);
  const double m = width_mult(c);
  for (auto& item : module.named_parameters()) {
    const auto name = prefix + item.key();
    auto& p = item.value();
    const auto shape = p.sizes().vec();
    const auto& base_shape = base.at(name);
    const int infinite = infinite_dims(shape, base_shape);
    if (p.dim() != 2 || infinite == 0) continue;
    const double hidden = infinite == 2 ? 1.0 / std::sqrt(m) : 1.0;
    p.mul_(base_std_ratio(name, shape, base_shape, c) * hidden);
  }
}

// u-muP's initialisation (unit_scaling's Linear, Embedding and LinearReadout reset_parameters:
// normal_ with std 1; biases 0; LayerNorm and RMSNorm gains 1, LayerNorm biases 0): every matrix and
// table N(0, 1), every vector as its constructor made it but biases zeroed, the padding row 0 as
// normlab's other inits leave it (the package has no padding). Nothing otherwise.
void init_unit_scaled(DecoderImpl& decoder, const ModelConfig& c) {
  if (!unit_scaled(c)) return;
  for (auto& item : decoder.named_parameters()) {
    auto& p = item.value();
    if (p.dim() >= 2)
      p.normal_(0.0, 1.0);
    else if (item.key().size() >= 4 && item.key().compare(item.key().size() - 4, 4, "bias") == 0)
      p.zero_();
  }
  decoder.embed_tokens->weight[kPad].zero_();
}

void check_profile(const ModelConfig& c, const data::Batch* profile) {
  if (c.scheme.init == InitMethod::kAdminProfile && profile == nullptr)
    throw std::invalid_argument("--init admin-profile needs a batch to profile on");
}

}  // namespace

void init_layer_xavier(EncoderLayerImpl& layer) {
  init_attention(layer.self_attn, InitMethod::kXavier, 1.0);
  xavier(layer.fc1, 1.0);
  xavier(layer.fc2, 1.0);
}

void init_layer_xavier(DecoderLayerImpl& layer) {
  init_attention(layer.self_attn, InitMethod::kXavier, 1.0);
  if (layer.encoder_attn) init_attention(layer.encoder_attn, InitMethod::kXavier, 1.0);
  xavier(layer.fc1, 1.0);
  xavier(layer.fc2, 1.0);
}

void scale_value_and_ffn(EncoderLayerImpl& layer, double factor) {
  torch::NoGradGuard no_grad;
  scale_value_and_output(layer.self_attn, factor);
  layer.fc1->weight.mul_(factor);
  layer.fc2->weight.mul_(factor);
}

void scale_value_and_ffn(DecoderLayerImpl& layer, double factor) {
  torch::NoGradGuard no_grad;
  scale_value_and_output(layer.self_attn, factor);
  if (layer.encoder_attn) scale_value_and_output(layer.encoder_attn, factor);
  layer.fc1->weight.mul_(factor);
  layer.fc2->weight.mul_(factor);
}

void init_encoder_decoder(Seq2SeqImpl& model, const data::Batch* profile) {
  const auto& c = model.config();
  check_profile(c, profile);
  {
    torch::NoGradGuard no_grad;
    init_encoder(model.encoder, c);
    init_decoder(model.decoder, c);
    // Norms start at weight 1, bias 0, DyT alpha 0.5 (their constructor's values); Admin's omega at 1
    // unless set above.
    rescale_for_mup(model, "", c);  // before Admin profiles the model
  }
  if (c.scheme.init == InitMethod::kAdminProfile) profile_admin(model, *profile);
}

void init_decoder_only(DecoderOnlyImpl& model, const data::Batch* profile) {
  const auto& c = model.config();
  check_profile(c, profile);
  {
    torch::NoGradGuard no_grad;
    if (c.scheme.init == InitMethod::kGpt2) {
      init_decoder_gpt2(model.decoder, c);
      init_positions(model.decoder->embed_positions, c);
    } else {
      init_decoder(model.decoder, c);
    }
    rescale_for_mup(model, "", c);
    init_unit_scaled(*model.decoder, c);
  }
  if (c.scheme.init == InitMethod::kAdminProfile) run_admin_profile(model, {model.decoder->admin_profile.get()}, *profile);
}

namespace {

void init_head_linear(const torch::nn::Linear& linear, const ModelConfig& c) {
  if (normal_002(c))
    normal_linear(linear, kGpt2Std);
  else
    xavier(linear, 1.0);
}

void draw_classification_head(ClassificationHeadImpl& head, const ModelConfig& c) {
  init_head_linear(head.dense, c);
  init_head_linear(head.out_proj, c);
}

void init_lm_head(MaskedLmHeadImpl& head, const ModelConfig& c) {
  init_head_linear(head.dense, c);
  if (head.weight.defined()) {  // --share none: an output projection of its own
    if (normal_002(c))
      init::normal_(head.weight, 0.0, kGpt2Std);
    else
      init_embedding(head.weight, false, c.embed_init);
  }
  head.bias.zero_();
}

}  // namespace

void init_classification_head(ClassificationHeadImpl& head, const ModelConfig& c) {
  draw_classification_head(head, c);
  rescale_for_mup(head, kClassificationHeadPrefix, c);
}

void init_encoder_only(EncoderOnlyImpl& model, const data::Batch* profile) {
  const auto& c = model.config();
  check_profile(c, profile);
  {
    torch::NoGradGuard no_grad;
    if (c.scheme.init == InitMethod::kBert)
      init_encoder_bert(model.encoder, c);
    else
      init_encoder(model.encoder, c);
    init_positions(model.encoder->segment_embeddings, c);  // segments as learned positions
    if (model.classification_head)
      draw_classification_head(*model.classification_head, c);
    else
      init_lm_head(*model.lm_head, c);
    rescale_for_mup(model, "", c);
  }
  if (c.scheme.init == InitMethod::kAdminProfile) run_admin_profile(model, {model.encoder->admin_profile.get()}, *profile);
}

void profile_admin(Seq2SeqImpl& model, const data::Batch& batch) {
  run_admin_profile(model, {model.encoder->admin_profile.get(), model.decoder->admin_profile.get()}, batch);
}

}  // namespace normlab::model
