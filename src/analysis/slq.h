// Stochastic Lanczos quadrature (Ubaru, Chen & Saad 2017; Ghorbani, Krishnan & Xiao 2019):
// each probe's Lanczos nodes and weights are a Gauss quadrature for the spectral measure seen
// from its start vector; averaged over probes and broadened by Gaussians they estimate the
// eigenvalue density.
#pragma once

#include <cstdint>
#include <vector>

namespace normlab::analysis {

struct Quadrature {
  std::vector<double> nodes, weights;  // weights sum to 1
};

struct DensityOptions {
  int64_t bins = 10000;         // grid points (PyHessian's num_bins)
  double sigma_squared = 1e-5;  // PyHessian's sigma_squared: the Gaussian's variance is
                                // sigma_squared * max(1, grid width)
  double overhead = 0.01;       // grid margin beyond the mean extreme nodes
};

struct Density {
  std::vector<double> grid, density;  // density integrates to 1 by the rectangle rule
  double variance = 0.0;              // of each Gaussian
};

// PyHessian's density_plot.density_generate exactly: grid = linspace over
// [mean_p min node - overhead, mean_p max node + overhead], density(x) = mean over probes of
// sum_j w_j N(x; node_j, variance), then divided by sum(density) * grid step.
Density spectral_density(const std::vector<Quadrature>& probes, const DensityOptions& options = {});

// sum_j w_j node_j^k, the quadrature's k-th moment: for a start vector v and k <= 2m-1 it
// equals v^T A^k v / ||v||^2 (exact Gauss quadrature), so n times its mean over Rademacher
// probes estimates trace(A^k).
double quadrature_moment(const Quadrature& q, int k);

}  // namespace normlab::analysis
