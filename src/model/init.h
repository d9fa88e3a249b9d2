// Parameter initialisation for every scheme (REFERENCE §1), applied after construction.
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "model/seq2seq.h"

namespace normlab::model {

// A batch for Admin's profiling forward pass: src (B,S), prev_output_tokens (B,T).
struct ProfileBatch {
  torch::Tensor src;
  torch::Tensor prev_output_tokens;
};

// Seeds torch's generator with `seed`, then initialises every parameter as
// model->config().scheme.init says. admin-profile needs `profile_batch` (throws otherwise).
void initialize(Seq2Seq& model, uint64_t seed, const ProfileBatch* profile_batch = nullptr);

// Admin profiling alone (REFERENCE §1): one training-mode forward on `batch` that sets every
// omega. Exposed for tests; initialize() calls it for admin-profile.
void profile_admin(Seq2Seq& model, const ProfileBatch& batch);

// The pieces initialize() is made of, for layers added to a trained model (model/stacking.h).
// fairseq's Xavier-uniform (q, k, v gain 1/sqrt(2): they were one fused matrix; out_proj,
// fc1, fc2 gain 1; biases 0). Call under torch::NoGradGuard.
void init_layer_xavier(EncoderLayerImpl& layer);
void init_layer_xavier(DecoderLayerImpl& layer);
// T-Fixup's scaling of a layer (REFERENCE §1), DT-Fixup's with factor < 1: every attention's
// v_proj by factor * sqrt(2) (undoing the fused gain, so v starts as Xavier with gain factor),
// out_proj, fc1 and fc2 weights by factor; biases untouched.
void scale_value_and_ffn(EncoderLayerImpl& layer, double factor);
void scale_value_and_ffn(DecoderLayerImpl& layer, double factor);

}  // namespace normlab::model
