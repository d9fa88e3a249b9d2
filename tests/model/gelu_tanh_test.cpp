// The fused bf16/fp16 GELU in the tanh form (model/kernels/gelu_tanh.h) against the formula in
// float64 (ATen's gelu(approximate="tanh") and its autograd on float64 copies of the same
// inputs): values and gradients within one rounding to the low precision.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/kernels/gelu_tanh.h"

namespace nk = normlab::model::kernels;

namespace {

// |got - want| <= ulp |want| + floor, elementwise; the worst error when not.
::testing::AssertionResult within_rounding(const torch::Tensor& got, const torch::Tensor& want, double ulp) {
  auto err = (got.to(torch::kFloat64) - want).abs();
  if ((err <= want.abs() * ulp + 1e-6).all().item<bool>()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "worst error " << err.max().item<double>();
}

}  // namespace

TEST(GeluTanh, MatchesTheFormulaInFloat64) {
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    for (int64_t n : {1, 31, 33, 1000, 70001}) {  // the 2x16-lane loop's tail, several tasks
      torch::manual_seed(n);
      auto x = (4 * torch::randn({n})).to(dtype);
      if (!nk::gelu_tanh_apply(x)) GTEST_SKIP() << "no AVX2 on this CPU";
      x[0] = n % 2 ? -30.0 : 30.0;  // saturated: gelu = 0 or x, gelu' = 0 or 1
      if (n > 3) {  // exp(-2u) at and beyond float's range
        x[1] = -200.0, x[2] = 60000.0, x[3] = -60000.0;
      }
      auto g = torch::randn({n}).to(dtype);
      auto xr = x.clone().requires_grad_(true);
      auto y = nk::gelu_tanh(xr);
      ASSERT_EQ(y.scalar_type(), dtype);
      auto dx = torch::autograd::grad({y}, {xr}, {g})[0];
      auto x64 = x.to(torch::kFloat64).requires_grad_(true);
      auto y64 = torch::gelu(x64, "tanh");
      auto dx64 = torch::autograd::grad({y64}, {x64}, {g.to(torch::kFloat64)})[0];
      const double ulp = dtype == torch::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;  // one rounding: 2^-9, 2^-12
      EXPECT_TRUE(within_rounding(y, y64.detach(), ulp)) << dtype << " n=" << n;
      EXPECT_TRUE(within_rounding(dx, dx64, ulp)) << dtype << " n=" << n;
    }
  }
}

TEST(GeluTanh, TakesStridedInputAndAnyShape) {
  torch::manual_seed(5);
  auto base = torch::randn({7, 40, 9}).to(torch::kBFloat16);
  if (!nk::gelu_tanh_apply(base)) GTEST_SKIP() << "no AVX2 on this CPU";
  auto x = base.transpose(0, 2);  // not contiguous
  auto y = nk::gelu_tanh(x);
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_TRUE(torch::equal(y, nk::gelu_tanh(x.contiguous())));
}

TEST(GeluTanh, IndependentOfThreadCount) {
  torch::manual_seed(3);
  auto x = (3 * torch::randn({300001})).to(torch::kBFloat16);
  if (!nk::gelu_tanh_apply(x)) GTEST_SKIP() << "no AVX2 on this CPU";
  auto g = torch::randn({300001}).to(torch::kBFloat16);
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    auto xr = x.clone().requires_grad_(true);
    auto y = nk::gelu_tanh(xr);
    return std::make_pair(y.detach(), torch::autograd::grad({y}, {xr}, {g})[0]);
  };
  const int before = at::get_num_threads();
  auto one = run(1), two = run(2);
  at::set_num_threads(before);
  EXPECT_TRUE(torch::equal(one.first, two.first));
  EXPECT_TRUE(torch::equal(one.second, two.second));
}

TEST(GeluTanh, RefusesFloat32AndASecondDerivative) {
  auto x = torch::randn({5}).to(torch::kBFloat16);
  if (!nk::gelu_tanh_apply(x)) GTEST_SKIP() << "no AVX2 on this CPU";
  EXPECT_FALSE(nk::gelu_tanh_apply(torch::randn({5})));  // fp32 takes ATen's kernel
  EXPECT_THROW(nk::gelu_tanh(torch::randn({5})), c10::Error);
  auto xr = x.clone().requires_grad_(true);
  auto y = nk::gelu_tanh(xr).sum();
  EXPECT_THROW(torch::autograd::grad({y}, {xr}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0].sum().backward(),
               c10::Error);
}
