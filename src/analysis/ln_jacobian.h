// Spectral norm of a norm's Jacobian, token by token (Xiong et al. 2020, Lemma 3, for
// LayerNorm; the same measurement for RMSNorm and DyT).
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "model/norm.h"

namespace normlab::analysis {

// x (N,C) rows fed to `norm` one by one -> (N) float64: ||J_LN(x_n)||_2, the largest singular
// value of d LN(x_n) / d x_n, by `iterations` steps of power iteration on J^T J (J v and J^T u
// by double back-propagation; rows are independent, so all N run at once).
torch::Tensor norm_jacobian_norms(const model::Norm& norm, const torch::Tensor& x,
                                  int64_t iterations = 20);

// x (N,C) -> (N) float64: sqrt(C) / ||y_n||_2 with y_n = x_n - mean(x_n), the Jacobian norm's
// value in Xiong et al. 2020 eqs. (20)-(27) (gamma = 1, the epsilon ignored).
torch::Tensor sqrt_d_over_centered_norm(const torch::Tensor& x);
// x (N,C) -> (N) float64: sqrt(C) / ||x_n||_2, RMSNorm's Jacobian norm (gamma = 1, eps
// ignored): J = sqrt(C)/||x|| (I - x x^T / ||x||^2), whose largest singular value is sqrt(C)/||x||.
torch::Tensor sqrt_d_over_norm(const torch::Tensor& x);

}  // namespace normlab::analysis
