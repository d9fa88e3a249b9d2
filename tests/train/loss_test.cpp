// Label smoothing against hand-computed values for both formulas (REFERENCE §2).
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/tokens.h"
#include "train/loss.h"

using namespace normlab;
using train::LabelSmoothingFormula;

namespace {
// V = 3, p = (1/2, 1/4, 1/4): nll of class 0 is ln 2, sum_v -log p_v = 5 ln 2. Second
// position is padding and must contribute nothing.
struct Example {
  torch::Tensor logits = torch::log(torch::tensor({0.5, 0.25, 0.25}, torch::kFloat64))
                             .repeat({1, 2, 1});  // (1,2,3)
  torch::Tensor target = torch::tensor({{int64_t{0}, normlab::kPad}});
};
}  // namespace

TEST(LabelSmoothing, UniformFormula) {
  Example e;
  auto s = train::label_smoothed_nll(e.logits, e.target, 0.1, LabelSmoothingFormula::kUniform, kPad);
  const double ln2 = std::log(2.0);
  EXPECT_EQ(s.tokens, 1);
  EXPECT_NEAR(s.nll.item<double>(), ln2, 1e-12);
  EXPECT_NEAR(s.loss.item<double>(), 0.9 * ln2 + 0.1 / 3.0 * 5.0 * ln2, 1e-12);
}

TEST(LabelSmoothing, ExclusiveFormula) {
  Example e;
  auto s = train::label_smoothed_nll(e.logits, e.target, 0.1, LabelSmoothingFormula::kExclusive, kPad);
  const double ln2 = std::log(2.0);
  // (1 - eps - eps/(V-1)) nll + eps/(V-1) smooth = 0.85 ln2 + 0.05 * 5 ln2 = 1.1 ln2.
  EXPECT_NEAR(s.loss.item<double>(), 1.1 * ln2, 1e-12);
}

TEST(LabelSmoothing, ExclusiveGivesTheTargetExactlyOneMinusEps) {
  // Cross entropy against q = (1-eps on target, eps/(V-1) elsewhere) equals the formula.
  auto logits = torch::randn({1, 1, 7}, torch::kFloat64);
  auto target = torch::tensor({{int64_t{4}}});
  const double eps = 0.2;
  auto q = torch::full({7}, eps / 6.0, torch::kFloat64);
  q[4] = 1.0 - eps;
  const double expected = -(q * torch::log_softmax(logits.view({7}), 0)).sum().item<double>();
  auto s = train::label_smoothed_nll(logits, target, eps, LabelSmoothingFormula::kExclusive, kPad);
  EXPECT_NEAR(s.loss.item<double>(), expected, 1e-12);
}

TEST(LabelSmoothing, ZeroEpsIsPlainCrossEntropy) {
  auto logits = torch::randn({2, 3, 5}, torch::kFloat64);
  auto target = torch::tensor(std::vector<int64_t>{4, 2, kPad, 3, kPad, kPad}).view({2, 3});
  auto s = train::label_smoothed_nll(logits, target, 0.0, LabelSmoothingFormula::kUniform, kPad);
  auto ce = torch::nn::functional::cross_entropy(
      logits.view({6, 5}), target.view({6}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kPad).reduction(torch::kSum));
  EXPECT_EQ(s.tokens, 3);
  EXPECT_NEAR(s.loss.item<double>(), ce.item<double>(), 1e-12);
}
