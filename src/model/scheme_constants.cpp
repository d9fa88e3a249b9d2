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

}  // namespace normlab::model
