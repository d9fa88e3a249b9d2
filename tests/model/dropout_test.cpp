// The counter-based dropout: keep rate, scaling, the same mask in backward (and double
// backward), reproducibility under torch::manual_seed, independence of the thread count.
#include <cmath>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/dropout.h"

namespace nm = normlab::model;

TEST(Dropout, KeepsOneMinusPOfTheElementsScaledByItsInverse) {
  torch::manual_seed(0);
  const double p = 0.3;
  const int64_t n = 1 << 20;
  auto x = torch::ones({n}, torch::kFloat64);
  auto y = nm::dropout(x, p, true);
  auto kept = y.ne(0);
  const double rate = kept.to(torch::kFloat64).mean().item<double>();
  EXPECT_NEAR(rate, 1 - p, 4 * std::sqrt(p * (1 - p) / n));  // 4 standard deviations
  EXPECT_TRUE(torch::allclose(y.masked_select(kept), torch::full_like(y.masked_select(kept), 1 / (1 - p))));
}

TEST(Dropout, IsTheIdentityInEvaluationOrWithPZero) {
  auto x = torch::randn({5, 7});
  EXPECT_TRUE(torch::equal(nm::dropout(x, 0.3, false), x));
  EXPECT_TRUE(torch::equal(nm::dropout(x, 0.0, true), x));
}

TEST(Dropout, BackwardAndDoubleBackwardUseTheForwardMask) {
  torch::manual_seed(1);
  const double p = 0.25, s = 1 / (1 - p);
  auto x = torch::randn({64, 33}, torch::dtype(torch::kFloat64).requires_grad(true));
  auto y = nm::dropout(x, p, true);
  auto mask = y.detach().ne(0).to(torch::kFloat64);
  // L = sum(y^2) = sum(m s^2 x^2): dL/dx = 2 m s^2 x, and the HVP with v = 1 is 2 m s^2.
  auto loss = (y * y).sum();
  auto g = torch::autograd::grad({loss}, {x}, /*grad_outputs=*/{}, /*retain_graph=*/true,
                                 /*create_graph=*/true)[0];
  EXPECT_TRUE(torch::allclose(g, 2 * mask * s * s * x.detach(), 1e-12, 1e-12));
  auto hv = torch::autograd::grad({g.sum()}, {x}, /*grad_outputs=*/{})[0];
  EXPECT_TRUE(torch::allclose(hv, 2 * mask * s * s, 1e-12, 1e-12));
}

TEST(Dropout, ReproducibleAndIndependentOfThreadCount) {
  auto x = torch::randn({300, 301});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  torch::manual_seed(7);
  auto a = nm::dropout(x, 0.1, true);
  at::set_num_threads(std::max(2, threads));
  torch::manual_seed(7);
  auto b = nm::dropout(x, 0.1, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, nm::dropout(x, 0.1, true)));  // the next call draws a new mask
}

TEST(Dropout, AddMatchesDropoutThenAddWithTheSameMask) {
  // Against the unfused composition from the same generator state, to the last bit: float and
  // double as dropout() then add; a bf16 branch into an fp32 residual as the branch cast to fp32
  // first (the scale is applied in float, not rounded to bf16).
  for (auto dtype : {torch::kFloat64, torch::kFloat32, torch::kBFloat16}) {
    torch::manual_seed(3);
    auto r = torch::randn({7, 33}, torch::kFloat64).to(dtype == torch::kFloat64 ? dtype : torch::kFloat32);
    auto y = torch::randn({7, 33}, torch::kFloat64).to(dtype);
    r.set_requires_grad(true);
    y.set_requires_grad(true);
    torch::manual_seed(9);
    auto fused = nm::dropout_add(r, y, 0.3, true);
    torch::manual_seed(9);
    auto unfused = r + nm::dropout(y.to(r.scalar_type()), 0.3, true);
    ASSERT_EQ(fused.scalar_type(), r.scalar_type());
    EXPECT_TRUE(torch::equal(fused, unfused)) << dtype;
    // Gradients: the residual's passes through, the branch's is masked and in the branch's dtype.
    auto w = torch::randn_like(r);
    auto gf = torch::autograd::grad({(fused * w).sum()}, {r, y});
    auto gu = torch::autograd::grad({(unfused * w).sum()}, {r, y});
    EXPECT_TRUE(torch::equal(gf[0], gu[0]));
    EXPECT_EQ(gf[1].scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(gf[1], gu[1])) << dtype;
  }
}

TEST(Dropout, AddIsTwiceDifferentiable) {
  // L = sum((r + m s y)^2): d2L/dy2 v = 2 m s^2 v (the mask twice), d2L/dr dy v = 2 m s v.
  torch::manual_seed(2);
  const double p = 0.25, s = 1 / (1 - p);
  auto r = torch::randn({40}, torch::dtype(torch::kFloat64).requires_grad(true));
  auto y = torch::randn({40}, torch::dtype(torch::kFloat64).requires_grad(true));
  auto out = nm::dropout_add(r, y, p, true);
  auto m = (out - r).detach().ne(0).to(torch::kFloat64);
  auto gy = torch::autograd::grad({(out * out).sum()}, {y}, {}, true, true)[0];
  auto v = torch::randn({40}, torch::kFloat64);
  auto h = torch::autograd::grad({(gy * v).sum()}, {y, r});
  EXPECT_TRUE(torch::allclose(h[0], 2 * m * s * s * v, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(h[1], 2 * m * s * v, 1e-12, 1e-12));
}
