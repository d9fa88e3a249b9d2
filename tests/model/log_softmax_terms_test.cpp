// The fused label-smoothing terms (model/kernels/log_softmax_terms.h) against the unfused
// composition in float64 on the same bf16/fp16 logits: values and gradients.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/kernels/log_softmax_terms.h"

namespace nk = normlab::model::kernels;

namespace {

// nll, smooth and the gradient of sum(w1 nll + w2 smooth) by log_softmax in float64.
std::vector<torch::Tensor> unfused(const torch::Tensor& logits, const torch::Tensor& target,
                                   const torch::Tensor& w1, const torch::Tensor& w2) {
  auto x = logits.to(torch::kFloat64).requires_grad_(true);
  auto lp = torch::log_softmax(x, -1);
  auto nll = -lp.gather(-1, target.unsqueeze(-1)).squeeze(-1);
  auto smooth = -lp.sum(-1);
  auto g = torch::autograd::grad({(w1 * nll + w2 * smooth).sum()}, {x})[0];
  return {nll.detach(), smooth.detach(), g};
}

}  // namespace

TEST(LogSoftmaxTerms, MatchTheUnfusedCompositionInBf16AndFp16) {
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    for (int64_t v : {37, 1000, 10003}) {  // tails of the 8- and 16-lane loops
      torch::manual_seed(v);
      auto logits = (3 * torch::randn({19, v})).to(dtype);
      if (!nk::log_softmax_terms_apply(logits)) GTEST_SKIP() << "no AVX2 on this CPU";
      auto target = torch::randint(0, v, {19}, torch::kInt64);
      target[0] = v - 1;  // the last column, in the scalar tail
      auto w1 = torch::rand({19}, torch::kFloat64), w2 = torch::rand({19}, torch::kFloat64);
      auto x = logits.clone().requires_grad_(true);
      auto terms = nk::log_softmax_terms(x, target);
      ASSERT_EQ(terms.nll.scalar_type(), torch::kFloat);
      auto g = torch::autograd::grad({(w1.to(torch::kFloat) * terms.nll + w2.to(torch::kFloat) * terms.smooth).sum()},
                                     {x})[0];
      ASSERT_EQ(g.scalar_type(), dtype);
      auto ref = unfused(logits, target, w1, w2);
      // Values: float arithmetic against float64 (smooth is a sum of V terms: relative 1e-5).
      EXPECT_TRUE(torch::allclose(terms.nll.to(torch::kFloat64), ref[0], 1e-5, 1e-5)) << dtype << " V=" << v;
      EXPECT_TRUE(torch::allclose(terms.smooth.to(torch::kFloat64), ref[1], 1e-5, 1e-3)) << dtype << " V=" << v;
      // Gradients: within one rounding to bf16/fp16 of the float64 gradient.
      const double ulp = dtype == torch::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
      auto err = (g.to(torch::kFloat64) - ref[2]).abs();
      EXPECT_TRUE((err <= ref[2].abs() * ulp + 1e-6).all().item<bool>())
          << dtype << " V=" << v << " worst " << err.max().item<double>();
    }
  }
}

TEST(LogSoftmaxTerms, IndependentOfThreadCount) {
  torch::manual_seed(3);
  auto logits = (3 * torch::randn({301, 1003})).to(torch::kBFloat16);
  if (!nk::log_softmax_terms_apply(logits)) GTEST_SKIP() << "no AVX2 on this CPU";
  auto target = torch::randint(0, 1003, {301}, torch::kInt64);
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    auto x = logits.clone().requires_grad_(true);
    auto terms = nk::log_softmax_terms(x, target);
    auto g = torch::autograd::grad({(terms.nll + 0.1 * terms.smooth).sum()}, {x})[0];
    return std::vector<torch::Tensor>{terms.nll, terms.smooth, g};
  };
  const int before = at::get_num_threads();
  auto one = run(1), two = run(2);
  at::set_num_threads(before);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
}

TEST(LogSoftmaxTerms, RefuseASecondDerivativeFp32AndABadTarget) {
  auto logits = torch::randn({3, 40}).to(torch::kBFloat16).requires_grad_(true);
  if (!nk::log_softmax_terms_apply(logits)) GTEST_SKIP() << "no AVX2 on this CPU";
  EXPECT_FALSE(nk::log_softmax_terms_apply(torch::randn({3, 40})));  // fp32 takes the exact path
  auto terms = nk::log_softmax_terms(logits, torch::tensor(std::vector<int64_t>{1, 2, 3}));
  EXPECT_THROW(torch::autograd::grad({terms.nll.sum()}, {logits}, {}, true, /*create_graph=*/true), c10::Error);
  EXPECT_THROW(nk::log_softmax_terms(logits, torch::tensor(std::vector<int64_t>{1, 40, 3})), c10::Error);
}
