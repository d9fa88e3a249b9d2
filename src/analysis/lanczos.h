// Lanczos with full re-orthogonalisation and power iteration on a symmetric operator
// (Golub & Van Loan, Matrix Computations, 4th ed., Alg. 10.1.1 + §10.3.1; PyHessian's
// density() and eigenvalues(), REFERENCE §4).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "analysis/hvp.h"

namespace normlab::analysis {

// Everything needed to continue a Lanczos run exactly where it stopped. After k completed
// steps: alpha has k entries, beta k (beta[i] = ||r_i||, the coupling of q_i and q_{i+1}),
// and basis k+1 orthonormal rows q_0..q_k, unless the run broke down (`invariant`: the
// Krylov space is invariant, T's eigenvalues are exact for the start vector; basis has k rows).
struct LanczosState {
  std::vector<double> alpha, beta;
  torch::Tensor basis;     // (rows used, n); the first row is the normalised start vector
  bool invariant = false;
  int64_t steps() const { return static_cast<int64_t>(alpha.size()); }
};

// q_0 = start / ||start||.
LanczosState lanczos_start(const torch::Tensor& start);

// Continues `state` until it has `steps` steps (at most n) or breaks down. After every step
// calls `after_step(state)` (e.g. to save it). Each step: one operator application, then
// r <- H q_k - alpha_k q_k - beta_{k-1} q_{k-1}, re-orthogonalised twice against every q
// (classical Gram-Schmidt twice, "twice is enough"). Deterministic for a deterministic op.
void lanczos_continue(const LinearOperator& op, int64_t steps, LanczosState& state,
                      const std::function<void(const LanczosState&)>& after_step = {});

// Eigen-decomposition of the tridiagonal T (diagonal alpha, off-diagonal beta[0..m-2]):
// Ritz values ascending (the SLQ nodes) and the squared first components of the
// eigenvectors (the SLQ weights, Golub & Meurant 2010 §6.2; they sum to 1).
struct TridiagonalEigen {
  std::vector<double> nodes, weights;
};
TridiagonalEigen tridiagonal_eigen(const std::vector<double>& alpha, const std::vector<double>& beta);

// The largest Ritz value of a Lanczos run and its Ritz vector (n), unit norm: the basis rows
// combined by T's top eigenvector; a warm start for the next run on a nearby operator.
struct TopRitz {
  double value = 0.0;
  torch::Tensor vector;
};
TopRitz top_ritz(const LanczosState& state);

// Rademacher vector (+-1 with probability 1/2 each) of n entries from its own generator
// seeded with `seed`, so that probe p depends on (seed, p) only.
torch::Tensor rademacher(int64_t n, uint64_t seed, torch::Dtype dtype);

// PyHessian's eigenvalues(top_n=1): v <- Hv/||Hv|| from a Gaussian start, Rayleigh quotient
// v.Hv, stopped when two successive quotients differ by less than tol*(|previous| + 1e-6).
// Converges to the eigenvalue of largest magnitude.
struct PowerResult {
  double eigenvalue = 0.0;
  int64_t iterations = 0;
  bool converged = false;
};
PowerResult power_iteration(const LinearOperator& op, int64_t n, torch::Dtype dtype, uint64_t seed,
                            int64_t max_iterations = 100, double tol = 1e-3);

}  // namespace normlab::analysis
