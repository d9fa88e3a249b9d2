// A tiny model configuration for unit tests: 16-24-2, 2 + 2 layers, vocabulary 30.
#pragma once

#include <string>

#include "model/config.h"

namespace normlab::test {

// The papers' scheme `scheme`, with Admin's omega in closed form (profiling needs a batch)
// and ReZero's alpha at 0.5 (0 would make every layer the identity).
inline model::ModelConfig tiny_config(const std::string& scheme) {
  model::ModelConfig c;
  c.d_model = 16;
  c.ffn_dim = 24;
  c.heads = 2;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.src_vocab_size = c.tgt_vocab_size = 30;
  c.scheme = model::scheme_by_name(scheme);
  if (c.scheme.init == model::InitMethod::kAdminProfile) c.scheme.init = model::InitMethod::kAdminClosedForm;
  c.rezero_alpha_init = 0.5;
  return c;
}

}  // namespace normlab::test
