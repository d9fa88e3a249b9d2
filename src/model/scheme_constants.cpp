#include "model/scheme_constants.h"

#include <cmath>

namespace normlab::model {
namespace {
double d(int64_t n) { return static_cast<double>(n); }
}  // namespace

double t_fixup_encoder_factor(int64_t n) { return 0.67 * std::pow(d(n), -0.25); }
double t_fixup_decoder_factor(int64_t n) { return std::pow(9.0 * d(n), -0.25); }
double t_fixup_encoder_embedding_factor(int64_t n) { return std::pow(9.0 * d(n), -0.25); }
double t_fixup_decoder_embedding_factor(int64_t n) { return std::pow(9.0 * d(n), -0.25); }

double admin_closed_form_omega(int64_t n) {
  return std::sqrt((d(n) + 1.0) / std::log(d(n) + 1.0) - 1.0);
}

double deepnorm_encoder_alpha(int64_t n, int64_t m) {
  return 0.81 * std::pow(std::pow(d(n), 4) * d(m), 1.0 / 16.0);
}
double deepnorm_encoder_beta(int64_t n, int64_t m) {
  return 0.87 * std::pow(std::pow(d(n), 4) * d(m), -1.0 / 16.0);
}
double deepnorm_decoder_alpha(int64_t m) { return std::pow(3.0 * d(m), 0.25); }
double deepnorm_decoder_beta(int64_t m) { return std::pow(12.0 * d(m), -0.25); }

double deepnorm_single_stack_alpha(int64_t n) { return std::pow(2.0 * d(n), 0.25); }
double deepnorm_single_stack_beta(int64_t n) { return std::pow(8.0 * d(n), -0.25); }
double t_fixup_single_stack_factor(int64_t n) { return std::pow(6.0 * d(n), -0.25); }

StackConstants stack_constants(const ModelConfig& c, bool decoder) {
  const bool deepnorm = c.scheme.residual == ResidualForm::kDeepNorm;
  StackConstants k;
  if (c.single_stack()) {
    k.layers = c.stack_layers();
    k.residual_blocks = 2 * k.layers;
    k.deepnorm_alpha = deepnorm ? deepnorm_single_stack_alpha(k.layers) : 1.0;
    k.deepnorm_beta = deepnorm_single_stack_beta(k.layers);
    k.t_fixup_factor = k.t_fixup_embedding = t_fixup_single_stack_factor(k.layers);
  } else if (decoder) {
    k.layers = c.decoder_layers;
    k.residual_blocks = 3 * k.layers;
    k.deepnorm_alpha = deepnorm ? deepnorm_decoder_alpha(k.layers) : 1.0;
    k.deepnorm_beta = deepnorm_decoder_beta(k.layers);
    k.t_fixup_factor = t_fixup_decoder_factor(k.layers);
    k.t_fixup_embedding = t_fixup_decoder_embedding_factor(k.layers);
  } else {
    k.layers = c.encoder_layers;
    k.residual_blocks = 2 * k.layers;
    k.deepnorm_alpha = deepnorm ? deepnorm_encoder_alpha(c.encoder_layers, c.decoder_layers) : 1.0;
    k.deepnorm_beta = deepnorm_encoder_beta(c.encoder_layers, c.decoder_layers);
    k.t_fixup_factor = t_fixup_encoder_factor(k.layers);
    k.t_fixup_embedding = t_fixup_encoder_embedding_factor(k.layers);
  }
  return k;
}

}  // namespace normlab::model
