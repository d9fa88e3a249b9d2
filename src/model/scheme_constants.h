// Closed-form constants of the schemes (REFERENCE §1). Torch-free, unit-tested on their own.
#pragma once

#include <cstdint>

#include "model/config.h"

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

// A single stack of N layers of two residual blocks each (self-attention, FFN), as a
// decoder-only or an encoder-only model has (docs/schemes.md, "Model kinds"):
// DeepNorm, Wang et al. 2022 Table 1's decoder-only (and encoder-only) row:
// alpha = (2N)^(1/4), beta = (8N)^(-1/4).
double deepnorm_single_stack_alpha(int64_t layers);
double deepnorm_single_stack_beta(int64_t layers);
// T-Fixup: Huang et al. 2020 Eq. 7 without its encoder-memory terms (no cross-attention),
// L (|v|^2 |w|^2 + |v|^2 |y|^2 + |w|^2 |y|^2) = Theta(1) over L = 2N blocks, solved with the
// paper's own choice of equal norms |v| = |w| = |y| = (3L)^(-1/4): (6N)^(-1/4), for v_proj,
// out_proj, fc1, fc2 and the token table alike.
double t_fixup_single_stack_factor(int64_t layers);

// The scheme constants of one stack of a model of `c`: `decoder` picks the decoder stack, else
// the encoder; a single-stack kind's one stack gets the single-stack constants either way.
struct StackConstants {
  int64_t layers = 0;                // N of the stack
  int64_t residual_blocks = 0;       // 2 per encoder layer, 3 per decoder layer with encoder attention
  double deepnorm_alpha = 1.0;       // the residual multiplier (DeepNorm), 1 otherwise
  double deepnorm_beta = 1.0;        // DeepNorm's Xavier gain of v_proj, out_proj, fc1, fc2
  double t_fixup_factor = 1.0;       // T-Fixup's factor on v_proj, out_proj, fc1, fc2
  double t_fixup_embedding = 1.0;    // and on the stack's token table
};
StackConstants stack_constants(const ModelConfig& c, bool decoder);

}  // namespace normlab::model
