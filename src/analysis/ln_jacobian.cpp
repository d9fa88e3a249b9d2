#include "analysis/ln_jacobian.h"

#include <cmath>

#include <torch/torch.h>

namespace normlab::analysis {

torch::Tensor norm_jacobian_norms(const model::Norm& norm, const torch::Tensor& x,
                                  int64_t iterations) {
  torch::AutoGradMode grad_on(true);
  auto in = x.detach().clone().requires_grad_(true);  // (N,C)
  auto out = norm->forward(in);                       // (N,C)
  // J^T u = d(out . u)/d in; J v = d((J^T u) . v)/du, since J^T u is linear in u.
  auto u = torch::zeros_like(out).requires_grad_(true);
  auto jt_u = torch::autograd::grad({out}, {in}, {u}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  auto unit_rows = [](const torch::Tensor& t) {
    return t / t.norm(2, {1}, true).clamp_min(1e-30);
  };
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  auto v = unit_rows(torch::randn(in.sizes(), gen, in.options().requires_grad(false)).to(in.device()));
  torch::Tensor sigma;
  for (int64_t i = 0; i < iterations; ++i) {
    auto jv = torch::autograd::grad({jt_u}, {u}, {v}, /*retain_graph=*/true)[0];         // (N,C)
    sigma = jv.norm(2, {1});                                                          // (N)
    auto jtjv = torch::autograd::grad({out}, {in}, {jv.detach()}, /*retain_graph=*/true)[0];
    v = unit_rows(jtjv.detach());
  }
  return sigma.detach().to(torch::kFloat64);
}

torch::Tensor sqrt_d_over_centered_norm(const torch::Tensor& x) {
  auto y = x.detach().to(torch::kFloat64);
  y = y - y.mean(1, true);
  return std::sqrt(static_cast<double>(x.size(1))) / y.norm(2, {1});
}

torch::Tensor sqrt_d_over_norm(const torch::Tensor& x) {
  return std::sqrt(static_cast<double>(x.size(1))) / x.detach().to(torch::kFloat64).norm(2, {1});
}

}  // namespace normlab::analysis
