// The fused beam-search scores against their unfused composition: ATen's log_softmax in
// float, fairseq's NaN -> -inf, plus each row's score; float32, bf16 and fp16 logits, rows
// whose width is not a multiple of the vector length, -inf entries, rows with a NaN or +inf,
// a row without a finite entry.
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/kernels/beam_log_probs.h"

using namespace normlab;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

torch::Tensor reference(const torch::Tensor& logits, const torch::Tensor& scores) {
  auto lp = torch::log_softmax(logits.to(torch::kFloat), -1);
  lp.masked_fill_(lp.isnan(), -kInf);
  return scores.defined() ? lp + scores.unsqueeze(1) : lp;
}

TEST(BeamLogProbs, FusedEqualsComposition) {
  if (!model::kernels::beam_log_probs_fused(torch::zeros({1, 1}))) GTEST_SKIP() << "no AVX2 on this CPU";
  torch::manual_seed(3);
  for (const int64_t v : {37, 8000}) {
    auto logits = torch::randn({9, v}) * 4;
    logits[1][5] = -kInf;
    logits[2][v - 1] = std::numeric_limits<double>::quiet_NaN();
    logits[3][0] = kInf;
    logits[4].fill_(-kInf);
    auto scores = torch::randn({9}) * 10;
    scores[5] = -kInf;  // a beam that is out of the running
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      auto x = logits.to(dtype);
      for (const auto& s : {scores, torch::Tensor()}) {
        auto fused = model::kernels::beam_log_probs(x, s);
        auto expected = reference(x, s);
        ASSERT_EQ(fused.scalar_type(), torch::kFloat);
        EXPECT_TRUE(torch::equal(fused.isneginf(), expected.isneginf())) << "V " << v << " dtype " << dtype;
        EXPECT_FALSE(fused.isnan().any().item<bool>());
        auto finite = expected.isfinite();
        EXPECT_TRUE(torch::allclose(fused.masked_select(finite), expected.masked_select(finite), 1e-6, 2e-5))
            << "V " << v << " dtype " << dtype;
      }
    }
  }
}

// float64 (the tests' models) takes the composition itself.
TEST(BeamLogProbs, Float64IsTheComposition) {
  auto logits = torch::randn({3, 11}, torch::kFloat64);
  auto scores = torch::randn({3}, torch::kFloat64);
  auto expected = torch::log_softmax(logits, -1) + scores.unsqueeze(1);
  auto out = model::kernels::beam_log_probs(logits, scores);
  EXPECT_EQ(out.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::allclose(out, expected, 0, 1e-15));
}

}  // namespace
