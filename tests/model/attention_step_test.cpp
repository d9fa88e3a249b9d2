// The fused decoding-step attention against softmax(q k^T + bias) v computed in float64 by ATen.
// Self-attention, on the keys and values gathered through the row table: float32, bf16 and
// fp16, positions whose tensors hold different numbers of rows (sentences dropped), rows reading
// other rows' histories (beams reordered), a position count that is not a multiple of the
// vector length. Encoder attention: a sentence's beams reading its keys and values, -inf bias at
// its padding. And what they refuse: a row index past its position's rows, a dtype or shape
// mismatch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/kernels/attention_step.h"

using namespace normlab;

namespace {

struct Case {
  torch::Tensor q, rows;
  std::vector<torch::Tensor> keys, values;
};

// n rows, h heads of d, p positions; position i holds n + 3 * (p - 1 - i) rows (more rows
// earlier, as before sentences finished), and rows[n][i] picks any of them.
Case random_case(int64_t n, int64_t h, int64_t d, int64_t p, torch::ScalarType type) {
  Case c;
  c.q = (torch::randn({n, h, d}) / std::sqrt(static_cast<double>(d))).to(type);
  std::vector<torch::Tensor> columns;
  for (int64_t i = 0; i < p; ++i) {
    const int64_t available = n + 3 * (p - 1 - i);
    c.keys.push_back((torch::randn({available, h, d}) * 2).to(type));
    c.values.push_back(torch::randn({available, h, d}).to(type));
    columns.push_back(torch::randint(std::max<int64_t>(available, 1), {n, 1}, torch::kLong));
  }
  c.rows = torch::cat(columns, 1).contiguous();
  return c;
}

torch::Tensor reference(const Case& c) {
  std::vector<torch::Tensor> ks, vs;
  for (size_t i = 0; i < c.keys.size(); ++i) {
    auto r = c.rows.select(1, static_cast<int64_t>(i));
    ks.push_back(c.keys[i].to(torch::kDouble).index_select(0, r));
    vs.push_back(c.values[i].to(torch::kDouble).index_select(0, r));
  }
  auto k = torch::stack(ks, 2), v = torch::stack(vs, 2);  // (N,H,P,D)
  auto scores = torch::matmul(c.q.to(torch::kDouble).unsqueeze(2), k.transpose(-2, -1));  // (N,H,1,P)
  return torch::matmul(torch::softmax(scores, -1), v).squeeze(2);                          // (N,H,D)
}

// |out - reference| <= rel |reference| + abs: bf16 and fp16 round the output once (at most
// 2^-8 and 2^-11 relative), after float arithmetic (float32's own error, ~1e-6 of the values).
struct Tolerance {
  torch::ScalarType type;
  double rel, abs;
};
const Tolerance kTolerances[] = {{torch::kFloat, 0.0, 2e-6}, {torch::kBFloat16, 1.0 / 256, 2e-6},
                                 {torch::kHalf, 1.0 / 2048, 2e-6}};

double excess(const torch::Tensor& out, const torch::Tensor& want, double rel) {
  return ((out.to(torch::kDouble) - want).abs() - rel * want.abs()).max().item<double>();
}

TEST(AttentionStep, SelfEqualsSoftmaxAttentionOnTheGatheredHistory) {
  torch::manual_seed(3);
  if (!model::kernels::attention_step_fused(torch::zeros({1, 1, 8}))) GTEST_SKIP() << "no AVX2 and FMA";
  for (const auto& [type, rel, abs] : kTolerances) {
    for (const int64_t p : {1, 7, 8, 21}) {
      auto c = random_case(13, 4, 16, p, type);
      auto out = model::kernels::self_attention_step(c.q, c.keys, c.values, c.rows);
      ASSERT_EQ(out.scalar_type(), type);
      ASSERT_EQ(out.sizes(), c.q.sizes());
      auto want = reference(c);
      EXPECT_LT(excess(out, want, rel), abs) << type << ", " << p << " positions";
    }
  }
  auto empty = random_case(0, 2, 8, 3, torch::kFloat);
  EXPECT_EQ(model::kernels::self_attention_step(empty.q, empty.keys, empty.values, empty.rows).size(0), 0);
}

TEST(AttentionStep, EncoderEqualsSoftmaxAttentionOfEachSentencesBeams) {
  torch::manual_seed(4);
  if (!model::kernels::attention_step_fused(torch::zeros({1, 1, 8}))) GTEST_SKIP() << "no AVX2 and FMA";
  constexpr int64_t kSentences = 3, kBeams = 4, kHeads = 2, kD = 24;
  for (const auto& [type, rel, abs] : kTolerances) {
    for (const int64_t s : {1, 9, 16}) {
      // As the decoder projects them: (B,S,C) viewed by heads as (B,H,S,D), strided.
      auto k = (torch::randn({kSentences, s, kHeads, kD}) * 2).to(type).transpose(1, 2);
      auto v = torch::randn({kSentences, s, kHeads, kD}).to(type).transpose(1, 2);
      auto bias = torch::zeros({kSentences, 1, 1, s});
      if (s > 1) bias[1].narrow(-1, s / 2, s - s / 2).fill_(-std::numeric_limits<double>::infinity());  // padding
      bias = bias.expand({kSentences, kHeads, 1, s}).contiguous().to(type);
      // All sentences in order, or sentence 1 finished and the other two's rows swapped.
      for (const auto& table : {torch::Tensor(), torch::tensor(std::vector<int64_t>{2, 0})}) {
        const auto current = table.defined() ? table : torch::arange(kSentences);
        auto q = (torch::randn({current.size(0) * kBeams, kHeads, kD}) / std::sqrt(double{kD})).to(type);
        for (const bool with_bias : {true, false}) {
          const auto& b = with_bias ? bias : torch::Tensor();
          auto out = model::kernels::encoder_attention_step(q, k, v, b, table);
          ASSERT_EQ(out.scalar_type(), type);
          // Each beam reading its sentence: keys, values and bias gathered and repeated per beam.
          auto rep = [&](const torch::Tensor& x) {
            return x.to(torch::kDouble).index_select(0, current).repeat_interleave(kBeams, 0);
          };
          auto scores = torch::matmul(q.to(torch::kDouble).unsqueeze(2), rep(k).transpose(-2, -1));  // (N,H,1,S)
          if (with_bias) scores = scores + rep(bias);
          auto want = torch::matmul(torch::softmax(scores, -1), rep(v)).squeeze(2);
          EXPECT_LT(excess(out, want, rel), abs)
              << type << ", " << s << " positions, bias " << with_bias << ", table " << table.defined();
        }
      }
    }
  }
  auto q = torch::randn({6, 2, 8}), k = torch::randn({4, 2, 5, 8});
  EXPECT_THROW(model::kernels::encoder_attention_step(q, k, k, {}, {}), c10::Error);  // 6 rows for 4 sentences
  EXPECT_THROW(model::kernels::encoder_attention_step(q.narrow(0, 0, 4), k, k.to(torch::kBFloat16), {}, {}), c10::Error);
  EXPECT_THROW(model::kernels::encoder_attention_step(q.narrow(0, 0, 4), k, k, torch::zeros({4, 2, 1, 4}), {}), c10::Error);
  EXPECT_THROW(model::kernels::encoder_attention_step(q, k, k, {}, torch::tensor(std::vector<int64_t>{0, 4})),
               c10::Error);  // sentence 4 of 4
}

TEST(AttentionStep, RefusesRowsOutsideTheirPositionAndMismatchedOperands) {
  if (!model::kernels::attention_step_fused(torch::zeros({1, 1, 8}))) GTEST_SKIP() << "no AVX2 and FMA";
  EXPECT_FALSE(model::kernels::attention_step_fused(torch::zeros({2, 2, 12})));  // D not a multiple of 8
  EXPECT_FALSE(model::kernels::attention_step_fused(torch::zeros({2, 2, 8}, torch::kDouble)));
  auto c = random_case(5, 2, 8, 4, torch::kFloat);
  auto past = c.rows.clone();
  past[2][1] = c.keys[1].size(0);  // one past the last row of position 1
  EXPECT_THROW(model::kernels::self_attention_step(c.q, c.keys, c.values, past), c10::Error);
  auto negative = c.rows.clone();
  negative[0][3] = -1;
  EXPECT_THROW(model::kernels::self_attention_step(c.q, c.keys, c.values, negative), c10::Error);
  auto keys = c.keys;
  keys[2] = keys[2].to(torch::kBFloat16);
  EXPECT_THROW(model::kernels::self_attention_step(c.q, keys, c.values, c.rows), c10::Error);
  EXPECT_THROW(model::kernels::self_attention_step(c.q, c.keys, c.values, c.rows.narrow(1, 0, 3)), c10::Error);
  auto values = c.values;
  values.pop_back();
  EXPECT_THROW(model::kernels::self_attention_step(c.q, c.keys, values, c.rows), c10::Error);
}

}  // namespace
