// A tiny model configuration for unit tests: 16-24-2, 2 + 2 layers, vocabulary 30.
#pragma once

#include <string>

#include "model/config.h"

namespace normlab::test {

// The named scheme `scheme` ("NAME+qk-norm": with QK-norm), with Admin's omega in closed form
// (profiling needs a batch) and ReZero's alpha at 0.5 (0 would make every layer the identity).
inline model::ModelConfig tiny_config(std::string scheme) {
  const std::string qk = "+qk-norm";
  const bool qk_norm = scheme.size() > qk.size() && scheme.compare(scheme.size() - qk.size(), qk.size(), qk) == 0;
  if (qk_norm) scheme.resize(scheme.size() - qk.size());
  model::ModelConfig c;
  c.d_model = 16;
  c.ffn_dim = 24;
  c.heads = 2;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.src_vocab_size = c.tgt_vocab_size = 30;
  c.scheme = model::scheme_by_name(scheme);
  c.scheme.qk_norm = qk_norm;
  if (c.scheme.init == model::InitMethod::kAdminProfile) c.scheme.init = model::InitMethod::kAdminClosedForm;
  c.rezero_alpha_init = 0.5;
  return c;
}

}  // namespace normlab::test
