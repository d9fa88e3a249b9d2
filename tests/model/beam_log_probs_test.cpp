// The fused beam-search scores against their unfused composition: ATen's log_softmax in
// float, fairseq's NaN -> -inf, plus each row's score; float32, bf16 and fp16 logits, rows
// whose width is not a multiple of the vector length, -inf entries, rows with a NaN or +inf,
// a row without a finite entry. The candidates of a step (beam_candidates) against ATen's topk
// of that composition after the beam search's masks.
#include <limits>
#include <utility>
#include <vector>

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

// Random rows of width v with the cases a decoding step meets: a -inf entry (row 1), a NaN
// (row 2), +inf (row 3), no finite entry (row 4); scores (rows) with a beam out of the running
// (row 5, -inf).
std::pair<torch::Tensor, torch::Tensor> rows_with_special_cases(int64_t rows, int64_t v) {
  auto logits = torch::randn({rows, v}) * 4;
  logits[1][5] = -kInf;
  logits[2][v - 1] = std::numeric_limits<double>::quiet_NaN();
  logits[3][0] = kInf;
  logits[4].fill_(-kInf);
  auto scores = torch::randn({rows}) * 10;
  scores[5] = -kInf;
  return {logits, scores};
}

TEST(BeamLogProbs, FusedEqualsComposition) {
  if (!model::kernels::beam_log_probs_fused(torch::zeros({1, 1}))) GTEST_SKIP() << "no AVX2 on this CPU";
  torch::manual_seed(3);
  for (const int64_t v : {37, 8000}) {
    auto [logits, scores] = rows_with_special_cases(9, v);
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

// The masks of beam_search before the fused selection: banned ids -inf, eos-only rows.
torch::Tensor masked(torch::Tensor lp, const std::vector<int64_t>& banned, const std::vector<uint8_t>& eos_only,
                     int64_t eos) {
  for (size_t i = 0; i < eos_only.size(); ++i) {
    if (!eos_only[i]) continue;
    const auto kept = lp[static_cast<int64_t>(i)][eos].item<double>();
    lp[static_cast<int64_t>(i)].fill_(-kInf);
    lp[static_cast<int64_t>(i)][eos] = kept;
  }
  for (const auto id : banned) lp.select(1, id).fill_(-kInf);
  return lp;
}

TEST(BeamCandidates, FusedEqualsTopkOfTheMaskedComposition) {
  if (!model::kernels::beam_log_probs_fused(torch::zeros({1, 1}))) GTEST_SKIP() << "no AVX2 on this CPU";
  torch::manual_seed(5);
  for (const int64_t v : {37, 8000}) {
    auto [logits, scores] = rows_with_special_cases(10, v);
    logits[6][2] = 40;  // the eos of an eos-only row is also the row's best
    logits[7][2] = 40;  // a banned id that would be the row's best
    logits[8][30] = 40;  // a banned id past the special ones' vector, the row's best
    const std::vector<uint8_t> eos_only = {0, 0, 0, 0, 0, 0, 1, 0, 1, 0};
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      // bf16/fp16 logits tie often; the values must still agree, and the ids where a value is unique.
      auto x = logits.to(dtype);
      for (const int64_t k : {1, 10, 37}) {
        for (const auto& banned : {std::vector<int64_t>{0, 1, 3}, std::vector<int64_t>{0, 1, 3, 2},
                                   std::vector<int64_t>{30, 3, 0}}) {
          for (const auto& only : {std::vector<uint8_t>{}, eos_only}) {
            const auto what = "V " + std::to_string(v) + " k " + std::to_string(k) + " banned " +
                              std::to_string(banned.size()) + " eos-only " + std::to_string(only.size());
            auto got = model::kernels::beam_candidates(x, scores, k, banned, only, 2);
            // The reference values: the fused scores (tested against ATen above), masked.
            auto [values, ids] = masked(model::kernels::beam_log_probs(x, scores), banned, only, 2).topk(k);
            ASSERT_EQ(got.values.sizes(), values.sizes()) << what;
            EXPECT_TRUE(torch::equal(got.values, values)) << what;
            // Every id is in range, distinct within its row, and carries its value.
            auto lp = masked(model::kernels::beam_log_probs(x, scores), banned, only, 2);
            EXPECT_TRUE(torch::equal(lp.gather(1, got.ids), got.values)) << what;
            EXPECT_TRUE(torch::equal(std::get<0>(got.ids.sort(1)).diff(1, 1).gt(0).all(), torch::tensor(true)))
                << what;
            for (int64_t i = 0; i < x.size(0); ++i)
              for (int64_t j = 0; j < k; ++j) {
                const auto value = values[i][j].item<float>();
                if (std::isfinite(value) && lp[i].eq(value).sum().item<int64_t>() == 1)
                  EXPECT_EQ(got.ids[i][j].item<int64_t>(), ids[i][j].item<int64_t>()) << what << " row " << i;
              }
          }
        }
      }
    }
  }
}

// Float64 takes ATen's topk of the masked composition itself.
TEST(BeamCandidates, Float64IsTheMaskedComposition) {
  auto logits = torch::randn({4, 11}, torch::kFloat64);
  auto scores = torch::randn({4}, torch::kFloat64);
  const std::vector<uint8_t> only = {0, 1, 0, 0};
  auto expected = masked(torch::log_softmax(logits, -1) + scores.unsqueeze(1), {0, 1, 3}, only, 2).topk(4);
  auto got = model::kernels::beam_candidates(logits, scores, 4, {0, 1, 3}, only, 2);
  EXPECT_EQ(got.values.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::allclose(got.values, std::get<0>(expected), 0, 1e-15));
  EXPECT_TRUE(torch::equal(got.ids.select(0, 0), std::get<1>(expected).select(0, 0)));
}

}  // namespace
