#include "analysis/lanczos.h"

#include <ATen/CPUGeneratorImpl.h>
#include <cmath>
#include <limits>
#include <torch/torch.h>

namespace normlab::analysis {

LanczosState lanczos_start(const torch::Tensor& start) {
  TORCH_CHECK(start.dim() == 1 && start.numel() > 0, "lanczos: start must be a non-empty vector");
  const double norm = start.norm().item<double>();
  TORCH_CHECK(norm > 0 && std::isfinite(norm), "lanczos: start vector has norm ", norm);
  LanczosState s;
  s.basis = (start / norm).unsqueeze(0);  // (1,n)
  return s;
}

void lanczos_continue(const LinearOperator& op, int64_t steps, LanczosState& s,
                      const std::function<void(const LanczosState&)>& after_step) {
  const int64_t n = s.basis.size(1);
  steps = std::min(steps, n);
  int64_t rows = s.basis.size(0);  // rows in use: steps()+1, or steps() after a breakdown
  // Room for every row up front: rows are written in place, never re-allocated.
  if (s.basis.size(0) < steps + 1) {
    auto grown = torch::zeros({steps + 1, n}, s.basis.options());
    grown.narrow(0, 0, s.basis.size(0)).copy_(s.basis);
    s.basis = grown;
  }
  // Breakdown: the residual is at rounding level of |T|, 1000 machine epsilons (float64
  // 2.2e-13 |T|, float32 1.2e-4 |T|; a 200 x 200 float64 matrix with 5 distinct eigenvalues
  // leaves ~6e-13 after 5 steps).
  const double eps = s.basis.scalar_type() == torch::kFloat64 ? 2.220446049250313e-16 : 1.1920929e-07;
  double scale = 0.0;
  for (double a : s.alpha) scale = std::max(scale, std::abs(a));
  for (double b : s.beta) scale = std::max(scale, b);
  while (!s.invariant && s.steps() < steps) {
    const int64_t k = s.steps();
    auto q = s.basis[k];
    auto r = op(q).to(s.basis.scalar_type());  // (n)
    const double a = r.dot(q).item<double>();
    r.sub_(q, a);
    if (k > 0) r.sub_(s.basis[k - 1], s.beta[k - 1]);
    auto used = s.basis.narrow(0, 0, rows);  // (k+1,n)
    for (int pass = 0; pass < 2; ++pass) r.sub_(used.t().mv(used.mv(r)));
    const double b = r.norm().item<double>();
    s.alpha.push_back(a);
    s.beta.push_back(b);
    scale = std::max({scale, std::abs(a), b});
    if (b <= 1000.0 * eps * scale) {
      s.invariant = true;
    } else {
      s.basis[rows].copy_(r.div_(b));  // capacity steps+1 >= rows+1
      ++rows;
    }
    if (after_step) after_step({s.alpha, s.beta, s.basis.narrow(0, 0, rows), s.invariant});
  }
  s.basis = s.basis.narrow(0, 0, rows);
}

namespace {

// T's eigenvalues (ascending) and eigenvectors (columns), float64: diagonal alpha, off-diagonal
// beta[0..m-2].
std::tuple<torch::Tensor, torch::Tensor> tridiagonal_eigh(const std::vector<double>& alpha,
                                                          const std::vector<double>& beta) {
  const auto m = static_cast<int64_t>(alpha.size());
  TORCH_CHECK(m > 0, "tridiagonal_eigen: no Lanczos steps");
  auto t = torch::zeros({m, m}, torch::kFloat64);
  auto a = t.accessor<double, 2>();
  for (int64_t i = 0; i < m; ++i) {
    a[i][i] = alpha[i];
    if (i + 1 < m) a[i][i + 1] = a[i + 1][i] = beta[i];
  }
  return torch::linalg_eigh(t);
}

}  // namespace

TopRitz top_ritz(const LanczosState& state) {
  auto [values, vectors] = tridiagonal_eigh(state.alpha, state.beta);
  const int64_t m = state.steps();
  auto y = vectors.select(1, m - 1).to(state.basis.scalar_type());  // (m)
  auto v = state.basis.narrow(0, 0, m).t().mv(y);                   // (n)
  return {values[m - 1].item<double>(), v / v.norm()};
}

TridiagonalEigen tridiagonal_eigen(const std::vector<double>& alpha, const std::vector<double>& beta) {
  const auto m = static_cast<int64_t>(alpha.size());
  auto [values, vectors] = tridiagonal_eigh(alpha, beta);  // ascending
  auto first = vectors[0].square().contiguous();
  TridiagonalEigen e;
  e.nodes.assign(values.data_ptr<double>(), values.data_ptr<double>() + m);
  e.weights.assign(first.data_ptr<double>(), first.data_ptr<double>() + m);
  return e;
}

torch::Tensor rademacher(int64_t n, uint64_t seed, torch::Dtype dtype) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(0, 2, {n}, gen, torch::TensorOptions().dtype(torch::kFloat64))
      .mul_(2).sub_(1).to(dtype);
}

PowerResult power_iteration(const LinearOperator& op, int64_t n, torch::Dtype dtype, uint64_t seed,
                            int64_t max_iterations, double tol) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto v = torch::randn({n}, gen, torch::TensorOptions().dtype(torch::kFloat64)).to(dtype);
  v.div_(v.norm());
  PowerResult p;
  bool have = false;
  for (p.iterations = 1; p.iterations <= max_iterations; ++p.iterations) {
    auto hv = op(v).to(dtype);
    const double quotient = hv.dot(v).item<double>();
    v = hv / hv.norm();
    if (have && std::abs(p.eigenvalue - quotient) < tol * (std::abs(p.eigenvalue) + 1e-6)) {
      p.eigenvalue = quotient;
      p.converged = true;
      return p;
    }
    p.eigenvalue = quotient;
    have = true;
  }
  p.iterations = max_iterations;
  return p;
}

}  // namespace normlab::analysis
