// Inverted dropout with a counter-based mask: element i of a call is kept when
// hash(seed, i) >= p, so the backward pass regenerates the mask instead of storing it, and the
// result does not depend on the thread count. The seed of each call is drawn from torch's
// default generator, so torch::manual_seed makes training reproducible. About 10x faster
// than ATen's bernoulli_-based dropout on the CPU (docs/performance.md).
#pragma once

#include <torch/types.h>

namespace normlab::model {

// x * mask / (1 - p) in training with p > 0, else x itself. Differentiable any number of times.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

}  // namespace normlab::model
