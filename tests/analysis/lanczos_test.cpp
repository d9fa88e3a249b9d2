// Lanczos, SLQ, Hutchinson and power iteration on explicit symmetric matrices whose spectra
// are known by construction (A = Q diag(lambda) Q^T, Q orthogonal).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <numeric>

#include "analysis/hutchinson.h"
#include "analysis/lanczos.h"
#include "analysis/slq.h"
#include "known_spectrum.h"

namespace normlab::analysis {
namespace {

LinearOperator matrix_operator(const torch::Tensor& a) {
  return [a](const torch::Tensor& v) { return a.mv(v); };
}

std::vector<double> linspace(double lo, double hi, int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = lo + (hi - lo) * i / (n - 1);
  return v;
}

struct Spectrum {
  std::string name;
  std::vector<double> eigs;
};

std::vector<Spectrum> spectra() {
  std::vector<Spectrum> s;
  auto clustered = linspace(0.9, 1.1, 190);  // a cluster and well-separated outliers
  for (double x : {10.0, 9.5, 9.0, 3.0, -0.5, -0.6, -2.0, -2.5, 4.0, 5.0}) clustered.push_back(x);
  s.push_back({"clustered", clustered});
  s.push_back({"negative", linspace(-5.0, -0.1, 200)});  // all negative, evenly spread
  std::vector<double> degenerate;                          // 5 distinct values x 40
  for (double x : {-3.0, -1.0, 0.0, 2.0, 7.0}) degenerate.insert(degenerate.end(), 40, x);
  s.push_back({"degenerate", degenerate});
  auto indefinite = linspace(-1.0, 1.0, 196);
  for (double x : {5.0, 4.5, -4.0, -6.0}) indefinite.push_back(x);
  s.push_back({"indefinite", indefinite});
  return s;
}

TEST(Lanczos, ExtremesOfKnownSpectra) {
  for (const auto& sp : spectra()) {
    SCOPED_TRACE(sp.name);
    auto a = with_spectrum(sp.eigs, 7);
    const double hi = *std::max_element(sp.eigs.begin(), sp.eigs.end());
    const double lo = *std::min_element(sp.eigs.begin(), sp.eigs.end());
    auto s = lanczos_start(rademacher(a.size(0), 3, torch::kFloat64));
    lanczos_continue(matrix_operator(a), 100, s);
    const auto e = tridiagonal_eigen(s.alpha, s.beta);
    EXPECT_NEAR(e.nodes.back(), hi, 1e-6 * std::abs(hi));
    EXPECT_NEAR(e.nodes.front(), lo, 1e-6 * std::abs(lo));
    const double wsum = std::accumulate(e.weights.begin(), e.weights.end(), 0.0);
    EXPECT_NEAR(wsum, 1.0, 1e-12);
  }
}

TEST(Lanczos, DegenerateSpectrumBreaksDownAfterDistinctValues) {
  std::vector<double> eigs;
  for (double x : {-3.0, -1.0, 0.0, 2.0, 7.0}) eigs.insert(eigs.end(), 40, x);
  auto s = lanczos_start(rademacher(200, 5, torch::kFloat64));
  lanczos_continue(matrix_operator(with_spectrum(eigs, 11)), 100, s);
  EXPECT_TRUE(s.invariant);
  ASSERT_EQ(s.steps(), 5);  // the Krylov space of any vector has dimension <= #distinct values
  const auto e = tridiagonal_eigen(s.alpha, s.beta);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(e.nodes[i], std::vector<double>({-3, -1, 0, 2, 7})[i], 1e-10);
}

TEST(Lanczos, BasisStaysOrthonormal) {
  auto a = with_spectrum(spectra()[0].eigs, 13);
  auto s = lanczos_start(rademacher(200, 1, torch::kFloat64));
  lanczos_continue(matrix_operator(a), 120, s);
  auto gram = s.basis.matmul(s.basis.t());
  EXPECT_LT((gram - torch::eye(gram.size(0), torch::kFloat64)).abs().max().item<double>(), 1e-12);
}

// With m steps, Gauss quadrature is exact for polynomials of degree <= 2m-1:
// n * sum_j w_j node_j^k = z^T A^k z for the probe z (||z||^2 = n).
TEST(Slq, MomentsOfOneProbeAreExact) {
  for (const auto& sp : spectra()) {
    SCOPED_TRACE(sp.name);
    auto a = with_spectrum(sp.eigs, 17);
    auto z = rademacher(200, 9, torch::kFloat64);
    auto s = lanczos_start(z);
    lanczos_continue(matrix_operator(a), 10, s);
    const auto e = tridiagonal_eigen(s.alpha, s.beta);
    auto ak = z.clone();
    for (int k = 0; k <= 3; ++k) {
      const double exact = z.dot(ak).item<double>();
      EXPECT_NEAR(200.0 * quadrature_moment({e.nodes, e.weights}, k), exact, 1e-9 * (1 + std::abs(exact)));
      ak = a.mv(ak);
    }
  }
}

// Averaged over probes, n * moment estimates trace(A^k) = sum lambda^k (Hutchinson's
// estimator of f(A) = A^k): within 4 standard errors of the probes.
TEST(Slq, MomentsEstimateTraces) {
  const auto eigs = spectra()[3].eigs;
  auto a = with_spectrum(eigs, 19);
  for (int k = 0; k <= 3; ++k) {
    std::vector<double> samples;
    for (int p = 0; p < 40; ++p) {
      auto s = lanczos_start(rademacher(200, 100 + p, torch::kFloat64));
      lanczos_continue(matrix_operator(a), 8, s);
      const auto e = tridiagonal_eigen(s.alpha, s.beta);
      samples.push_back(200.0 * quadrature_moment({e.nodes, e.weights}, k));
    }
    double exact = 0;
    for (double x : eigs) exact += std::pow(x, k);
    const auto t = summarize_trace(samples);
    EXPECT_LT(std::abs(t.trace - exact), 4 * t.standard_error + 1e-9 * std::abs(exact)) << "k=" << k;
  }
}

// PyHessian's density_generate, recomputed here for two probes with hand-picked nodes.
TEST(Slq, DensityMatchesPyHessianFormula) {
  std::vector<Quadrature> q = {{{-1.0, 0.5, 2.0}, {0.2, 0.5, 0.3}}, {{-0.8, 1.5}, {0.6, 0.4}}};
  DensityOptions o;
  o.bins = 501;
  o.sigma_squared = 1e-2;
  const auto d = spectral_density(q, o);
  const double lo = (-1.0 - 0.8) / 2 - 0.01, hi = (2.0 + 1.5) / 2 + 0.01;
  const double var = 1e-2 * std::max(1.0, hi - lo);
  EXPECT_DOUBLE_EQ(d.variance, var);
  EXPECT_NEAR(d.grid.front(), lo, 1e-15);
  EXPECT_NEAR(d.grid.back(), hi, 1e-12);
  const double dx = (hi - lo) / 500;
  std::vector<double> raw(501);
  double total = 0;
  for (int j = 0; j < 501; ++j) {
    const double x = lo + j * dx;
    for (const auto& p : q)
      for (size_t i = 0; i < p.nodes.size(); ++i)
        raw[j] += 0.5 * p.weights[i] * std::exp(-std::pow(x - p.nodes[i], 2) / (2 * var)) / std::sqrt(2 * M_PI * var);
    total += raw[j];
  }
  double integral = 0;
  for (int j = 0; j < 501; ++j) {
    EXPECT_NEAR(d.density[j], raw[j] / (total * dx), 1e-12);
    integral += d.density[j] * dx;
  }
  EXPECT_NEAR(integral, 1.0, 1e-12);
}

TEST(Hutchinson, TraceWithinStandardErrorAndVarianceFormula) {
  const auto eigs = spectra()[0].eigs;
  auto a = with_spectrum(eigs, 23);
  const double exact = std::accumulate(eigs.begin(), eigs.end(), 0.0);
  const auto t = summarize_trace(hutchinson_samples(matrix_operator(a), 200, torch::kFloat64, 1, 400));
  EXPECT_LT(std::abs(t.trace - exact), 3 * t.standard_error);
  // Var(z^T A z) = 2 (||A||_F^2 - sum_i A_ii^2) for Rademacher z.
  const double var = 2 * (a.square().sum().item<double>() - a.diag().square().sum().item<double>());
  EXPECT_NEAR(t.standard_error * t.standard_error * 400, var, 0.25 * var);
}

TEST(PowerIteration, FindsEigenvalueOfLargestMagnitude) {
  auto eigs = linspace(-1.0, 2.0, 100);
  eigs.push_back(-7.0);
  auto r = power_iteration(matrix_operator(with_spectrum(eigs, 29)), 101, torch::kFloat64, 3);
  EXPECT_TRUE(r.converged);
  EXPECT_NEAR(r.eigenvalue, -7.0, 7e-3);
}

// Continuing a copy of the state after k steps gives the uninterrupted run bit for bit.
TEST(Lanczos, ContinuingASavedStateIsBitIdentical) {
  auto op = matrix_operator(with_spectrum(spectra()[3].eigs, 31));
  auto full = lanczos_start(rademacher(200, 4, torch::kFloat64));
  lanczos_continue(op, 30, full);
  LanczosState saved;
  auto part = lanczos_start(rademacher(200, 4, torch::kFloat64));
  lanczos_continue(op, 30, part, [&](const LanczosState& s) {
    if (s.steps() == 11) saved = {s.alpha, s.beta, s.basis.clone(), s.invariant};
  });
  ASSERT_EQ(saved.steps(), 11);
  lanczos_continue(op, 30, saved);
  ASSERT_EQ(saved.alpha.size(), full.alpha.size());
  for (size_t i = 0; i < full.alpha.size(); ++i) {
    EXPECT_EQ(saved.alpha[i], full.alpha[i]);
    EXPECT_EQ(saved.beta[i], full.beta[i]);
  }
  EXPECT_TRUE(torch::equal(saved.basis, full.basis));
}

}  // namespace
}  // namespace normlab::analysis
