// The counter-based dropout: keep rate, scaling, the same mask in backward (and double
// backward), reproducibility under torch::manual_seed, independence of the thread count.
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/dropout.h"

namespace nm = normlab::model;

namespace {

// The mask as dropout.h defines it, written out element by element: element i of a call with
// seed s is kept when the 32 bits of splitmix64(s + (i / 2) * 0x9e3779b97f4a7c15) for i (the
// low half for even i, the high half for odd i) are >= p 2^32. The seed is the call's draw
// from torch's default generator.
std::vector<bool> reference_keep(int64_t n, uint64_t seed, double p) {
  auto splitmix64 = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const auto threshold = static_cast<uint32_t>(p * 4294967296.0);
  std::vector<bool> keep(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = splitmix64(seed + static_cast<uint64_t>(i / 2) * 0x9e3779b97f4a7c15ULL);
    keep[i] = static_cast<uint32_t>(i % 2 == 0 ? h : h >> 32) >= threshold;
  }
  return keep;
}

uint64_t next_draw() {
  return static_cast<uint64_t>(
      torch::randint(std::numeric_limits<int64_t>::max(), {1}, torch::kInt64).item<int64_t>());
}

}  // namespace

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

TEST(Dropout, MaskIsTheDocumentedHashInEveryDtype) {
  // Odd sizes (the last pair half used), blocks of the kernel and several threads' ranges; the
  // kept values scaled in float (double for double), the fused add in the residual's type.
  for (int64_t n : {1, 7, 513, 40001}) {
    for (auto dtype : {torch::kFloat64, torch::kFloat32, torch::kBFloat16, torch::kHalf}) {
      const double p = 0.3;
      auto x = torch::randn({n}, torch::kFloat64).to(dtype);
      torch::manual_seed(n);
      const auto keep = reference_keep(n, next_draw(), p);
      torch::manual_seed(n);
      auto y = nm::dropout(x, p, true);
      auto math = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
      auto mask = torch::empty({n}, torch::kFloat64);
      for (int64_t i = 0; i < n; ++i) mask[i] = keep[i] ? 1.0 : 0.0;
      auto expected = (x.to(math) * mask.to(math) * static_cast<float>(1 / (1 - p))).to(dtype);
      if (dtype == torch::kFloat64) expected = x * mask * (1 / (1 - p));
      EXPECT_TRUE(torch::equal(y, expected)) << n << " " << dtype;

      auto r = torch::randn({n}, torch::kFloat64).to(math);
      torch::manual_seed(n);
      auto sum = nm::dropout_add(r, x, p, true);
      auto scale = dtype == torch::kFloat64 ? 1 / (1 - p) : static_cast<float>(1 / (1 - p));
      EXPECT_TRUE(torch::equal(sum, r + x.to(math) * mask.to(math) * scale)) << n << " " << dtype;
    }
  }
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
