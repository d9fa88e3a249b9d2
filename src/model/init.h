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

}  // namespace normlab::model
