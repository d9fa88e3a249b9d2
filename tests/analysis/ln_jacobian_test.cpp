// A norm's Jacobian spectral norm by power iteration against the explicit Jacobian built by
// central differences and its largest singular value (torch::linalg_svdvals), for every norm
// kind, and against the closed forms at initialisation (LayerNorm: Xiong et al. 2020;
// RMSNorm: sqrt(C)/||x||).
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "analysis/ln_jacobian.h"

namespace normlab::analysis {
namespace {

class NormJacobian : public ::testing::TestWithParam<model::NormKind> {};

TEST_P(NormJacobian, PowerIterationMatchesFiniteDifferenceJacobian) {
  torch::manual_seed(3);
  const int64_t C = 7;
  model::Norm norm(GetParam(), C, /*scale=*/0.7);
  norm->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;  // weight != 1, bias != 0: not the closed form's case
    norm->weight.uniform_(0.5, 2.0);
    if (norm->bias.defined()) norm->bias.uniform_(-1.0, 1.0);
    if (norm->alpha.defined()) norm->alpha.fill_(0.3);
  }
  auto x = torch::randn({4, C}, torch::kFloat64) * 3.0 + 1.0;
  const auto got = norm_jacobian_norms(norm, x, 200);
  torch::NoGradGuard no_grad;
  const double h = 1e-6;
  for (int64_t n = 0; n < x.size(0); ++n) {
    auto J = torch::zeros({C, C}, torch::kFloat64);
    for (int64_t k = 0; k < C; ++k) {
      auto up = x[n].clone(), down = x[n].clone();
      up[k] += h;
      down[k] -= h;
      J.select(1, k).copy_((norm(up.unsqueeze(0)) - norm(down.unsqueeze(0))).squeeze(0) / (2 * h));
    }
    const double expected = torch::linalg_svdvals(J).max().item<double>();
    EXPECT_NEAR(got[n].item<double>(), expected, 1e-6 * expected) << "row " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, NormJacobian,
                         ::testing::Values(model::NormKind::kLayerNorm, model::NormKind::kRMSNorm,
                                           model::NormKind::kDyT),
                         [](const auto& info) { return model::to_string(info.param); });

TEST(LayerNormJacobian, ClosedFormAtInitialisation) {
  // gamma = 1, beta = 0: ||J|| = sqrt(C) / sqrt(||y||^2 + C eps) (Xiong eq. 26 with LN's eps).
  torch::manual_seed(4);
  const int64_t C = 64;
  model::Norm norm(model::NormKind::kLayerNorm, C);
  norm->to(torch::kFloat64);
  auto x = torch::randn({5, C}, torch::kFloat64) * torch::tensor({0.1, 1.0, 3.0, 10.0, 30.0}, torch::kFloat64).unsqueeze(1);
  const auto got = norm_jacobian_norms(norm, x, 30);
  const auto y = x - x.mean(1, true);
  const auto closed = std::sqrt(static_cast<double>(C)) / (y.pow(2).sum(1) + C * 1e-5).sqrt();
  EXPECT_TRUE(torch::allclose(got, closed, 1e-9, 0)) << got << closed;
  EXPECT_TRUE(torch::allclose(sqrt_d_over_centered_norm(x), std::sqrt(double(C)) / y.norm(2, {1}), 1e-12, 0));
}

TEST(RMSNormJacobian, ClosedFormAtInitialisation) {
  // g = 1: J = s (I - x x^T / (||x||^2 + C eps)) with s = sqrt(C) / sqrt(||x||^2 + C eps), whose
  // largest singular value is s (on the directions orthogonal to x).
  torch::manual_seed(5);
  const int64_t C = 64;
  model::Norm norm(model::NormKind::kRMSNorm, C);
  norm->to(torch::kFloat64);
  auto x = torch::randn({5, C}, torch::kFloat64) * torch::tensor({0.1, 1.0, 3.0, 10.0, 30.0}, torch::kFloat64).unsqueeze(1);
  const auto got = norm_jacobian_norms(norm, x, 30);
  const auto closed = std::sqrt(static_cast<double>(C)) / (x.pow(2).sum(1) + C * 1e-5).sqrt();
  EXPECT_TRUE(torch::allclose(got, closed, 1e-9, 0)) << got << closed;
  EXPECT_TRUE(torch::allclose(sqrt_d_over_norm(x), std::sqrt(double(C)) / x.norm(2, {1}), 1e-12, 0));
}

}  // namespace
}  // namespace normlab::analysis
