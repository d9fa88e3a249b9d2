#include "model/unit_scaling.h"

#include <algorithm>
#include <cmath>

namespace normlab::model {
namespace {

// unit_scaling.core.functional.logarithmic_interpolation: exp(alpha ln upper + (1 - alpha) ln lower).
double log_interpolation(double alpha, double lower, double upper) {
  return std::exp(alpha * std::log(upper) + (1.0 - alpha) * std::log(lower));
}

const double kPi = std::acos(-1.0);

}  // namespace

bool unit_scaled(const ModelConfig& c) { return c.parametrisation == Parametrisation::kUmup; }

double unit_linear_scale(int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }

double unit_gelu_scale(double mult) {
  const double alpha = 1.0 / (1.0 + 0.25 / (mult * mult));  // sigmoid(log(4 mult^2))
  return log_interpolation(alpha, 2.0, std::sqrt(2.0 / (1.0 - 1.0 / kPi)));
}

double unit_attention_output_scale(int64_t head_dim, int64_t keys, bool causal, double mult) {
  const double S = static_cast<double>(keys);
  const double alpha = 1.0 / (1.0 + 4.0 * static_cast<double>(head_dim) / (mult * mult));
  const double lower = std::sqrt((causal ? std::log(S) : 1.0) / S);
  return 1.0 / log_interpolation(alpha, lower, 1.0);
}

double unit_residual_tau(int64_t index, int64_t blocks, const UmupAlphas& alphas) {
  const double ratio = alphas.residual_attn_ratio;
  const double a_ffn = alphas.residual * std::sqrt(2.0 / (1.0 + ratio * ratio));
  const double a_attn = ratio * a_ffn;
  const auto n_attn = static_cast<double>((index + 1) / 2), n_ffn = static_cast<double>(index / 2);
  const double a = index % 2 == 0 ? a_attn : a_ffn;
  return a / std::sqrt(static_cast<double>(blocks) / 2.0 + n_attn * a_attn * a_attn + n_ffn * a_ffn * a_ffn);
}

const std::vector<UmupAlphaField>& umup_alpha_fields() {
  static const std::vector<UmupAlphaField> fields = {
      {"--umup-alpha-ffn-act", "ffn_act", &UmupAlphas::ffn_act, "the FFN activation's mult: gelu(a x) / a (U.gelu)"},
      {"--umup-alpha-attn-softmax", "attn_softmax", &UmupAlphas::attn_softmax,
       "the attention softmax's mult: softmax(a q.k / D) (U.scaled_dot_product_attention)"},
      {"--umup-alpha-res", "residual", &UmupAlphas::residual,
       "the residual branches' contribution relative to the embedding (residual_mult)"},
      {"--umup-alpha-res-attn-ratio", "residual_attn_ratio", &UmupAlphas::residual_attn_ratio,
       "the attention branches' contribution relative to the FFN's (residual_attn_ratio)"},
      {"--umup-alpha-loss-softmax", "loss_softmax", &UmupAlphas::loss_softmax,
       "the loss softmax's mult on the logits (U.cross_entropy)"}};
  return fields;
}

bool UmupAlphas::defaults() const {
  const auto& fields = umup_alpha_fields();
  return std::all_of(fields.begin(), fields.end(), [&](const UmupAlphaField& f) { return this->*f.member == 1.0; });
}

std::vector<std::string> unit_scaling_problems(const ModelConfig& c) {
  std::vector<std::string> out;
  const auto& a = c.umup;
  if (!unit_scaled(c)) {
    if (!a.defaults()) out.push_back("--umup-alpha-* applies to --parametrisation u-mup only");
    return out;
  }
  for (const auto& f : umup_alpha_fields())
    if (const double v = a.*f.member; !(v > 0.0 && std::isfinite(v)))
      out.push_back(std::string(f.option) + " must be positive, got " + std::to_string(v));
  const std::string p = "--parametrisation u-mup";
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) out.push_back(p + " " + what);
  };
  need(c.kind == kDecoderOnly, "is built for --model-kind decoder-only (the package's TransformerDecoder), not " + c.kind);
  const auto& s = c.scheme;
  need(s.norm == NormPlacement::kPre && s.residual == ResidualForm::kPlain && !s.ln_scaling && !s.qk_norm,
       "needs the Pre-LN residual (--scheme pre-ln or rmsnorm: unit_scaling's TransformerLayer), without "
       "LayerNorm scaling or QK-norm");
  need(s.norm_kind == NormKind::kLayerNorm || s.norm_kind == NormKind::kRMSNorm,
       "needs LayerNorm or RMSNorm norms (--norm-kind)");
  need(c.share == SharedEmbeddings::kNone, "needs --share none (the readout's lr and multiplier are not the table's)");
  need(c.positions == PositionEmbedding::kLearned, "needs --positions learned (a unit-scaled table; --form gpt2)");
  need(!c.scale_embedding, "needs --no-scale-embedding (the table is unit-scaled; --form gpt2)");
  need(c.activation != Activation::kRelu, "needs --activation gelu or gelu-tanh (U.gelu's scale)");
  need(c.dropout == 0.0 && c.attention_dropout == 0.0 && c.activation_dropout == 0.0,
       "is implemented without dropout (--dropout, --attention-dropout, --activation-dropout 0)");
  need(c.norm_free_encoder_layers + c.norm_free_decoder_layers == 0, "has no norm-free layers");
  return out;
}

double unit_adam_lr_scale(const ModelConfig& c, const std::string& name, const std::vector<int64_t>& shape) {
  if (!unit_scaled(c)) return 1.0;
  const bool in_layers = name.find(".layers.") != std::string::npos;
  const double depth = in_layers ? 1.0 / std::sqrt(static_cast<double>(c.decoder_layers)) : 1.0;
  const bool readout = name.find("output_projection") != std::string::npos;
  if (shape.size() != 2 || readout) return depth;  // mup_type bias, norm (depth) or output (1)
  return depth / std::sqrt(static_cast<double>(shape[1]));  // mup_type weight: fan_in^-1/2
}

}  // namespace normlab::model
