// Inverted dropout with a counter-based mask: element i of a call is kept when
// hash(seed, i) >= p, so the backward pass regenerates the mask instead of storing it, and the
// result does not depend on the thread count. The seed of each call is drawn from torch's
// default generator, so torch::manual_seed makes training reproducible. The hash is
// splitmix64 of seed + (i / 2) * 0x9e3779b97f4a7c15, its low 32 bits deciding even i and its
// high 32 bits odd i; the loops (model/kernels/dropout_rows.h) run vectorised with AVX-512 where
// the CPU has it (docs/performance.md).
#pragma once

#include <torch/types.h>

namespace normlab::model {

// x * mask / (1 - p) in training with p > 0, else x itself. Differentiable any number of times.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

// residual + dropout(y, p, training) in one pass, in residual's dtype: y may be bf16/fp16 (a
// sub-layer's output under mixed precision) while the residual stream is fp32, and ATen's
// mixed-dtype add is 3x a cast and an add (docs/performance.md). On the CPU the mask is
// dropout()'s, from the same draw of the generator; float and double give dropout()'s bits.
// Shapes must be equal. Differentiable any number of times.
torch::Tensor dropout_add(const torch::Tensor& residual, const torch::Tensor& y, double p, bool training);

}  // namespace normlab::model
