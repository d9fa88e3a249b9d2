// Closed-form constants of the schemes (REFERENCE §1). Torch-free, unit-tested on their own.
#pragma once

#include <cstdint>

namespace normlab::model {

// T-Fixup (Huang et al. 2020, Eq. in §3.2; factors exactly as the authors' code):
// encoder matrices x 0.67 N_e^(-1/4); decoder matrices x (9 N_d)^(-1/4);
// encoder embedding x (9 N_e)^(-1/4), decoder embedding x (9 N_d)^(-1/4).
double t_fixup_encoder_factor(int64_t encoder_layers);
double t_fixup_decoder_factor(int64_t decoder_layers);
double t_fixup_encoder_embedding_factor(int64_t encoder_layers);
double t_fixup_decoder_embedding_factor(int64_t decoder_layers);

// Admin without profiling (admin-torch): omega = sqrt((N+1)/ln(N+1) - 1) for N residual
// sub-layers in the stack (2 per encoder layer, 3 per decoder layer).
double admin_closed_form_omega(int64_t residual_sublayers);

// DeepNorm (Wang et al. 2022): residual multiplier alpha and Xavier gain beta.
// Encoder: alpha = 0.81 (N^4 M)^(1/16), beta = 0.87 (N^4 M)^(-1/16);
// decoder: alpha = (3M)^(1/4), beta = (12M)^(-1/4). N encoder layers, M decoder layers.
double deepnorm_encoder_alpha(int64_t encoder_layers, int64_t decoder_layers);
double deepnorm_encoder_beta(int64_t encoder_layers, int64_t decoder_layers);
double deepnorm_decoder_alpha(int64_t decoder_layers);
double deepnorm_decoder_beta(int64_t decoder_layers);

}  // namespace normlab::model
