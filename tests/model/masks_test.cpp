// Padding never changes non-padding outputs; future target tokens never change earlier logits.
// For every scheme, on a tiny float64 model with dropout off.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/seq2seq.h"
#include "tiny_model.h"

using namespace normlab;
using namespace normlab::model;

namespace {

Seq2Seq tiny_model(const std::string& scheme) {
  Seq2Seq m(test::tiny_config(scheme));
  m->to(torch::kFloat64);
  initialize(m, 3);
  m->eval();
  return m;
}

// rows of equal length -> (B,L) int64
torch::Tensor ids(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return torch::tensor(flat).view({static_cast<int64_t>(rows.size()), -1});
}

class Masks : public ::testing::TestWithParam<std::string> {};

TEST_P(Masks, PaddingDoesNotChangeOutputs) {
  auto m = tiny_model(GetParam());
  torch::NoGradGuard no_grad;
  auto src = ids({{5, 6, 7, kEos}});
  auto prev = ids({{kEos, 8, 9}});
  auto alone = m->forward(src, prev);
  // The same pair padded to a longer source and target inside a batch of two.
  auto src2 = ids({{5, 6, 7, kEos, kPad, kPad}, {10, 11, 12, 13, 14, kEos}});
  auto prev2 = ids({{kEos, 8, 9, kPad}, {kEos, 15, 16, 17}});
  auto batched = m->forward(src2, prev2);
  EXPECT_TRUE(torch::allclose(batched[0].slice(0, 0, 3), alone[0], 1e-10, 1e-12));
}

TEST_P(Masks, FutureTargetsDoNotChangeEarlierLogits) {
  auto m = tiny_model(GetParam());
  torch::NoGradGuard no_grad;
  auto src = ids({{5, 6, 7, kEos}});
  auto a = m->forward(src, ids({{kEos, 8, 9, 10, 11}}));
  auto b = m->forward(src, ids({{kEos, 8, 9, 20, 21}}));
  EXPECT_TRUE(torch::allclose(a.slice(1, 0, 3), b.slice(1, 0, 3), 1e-10, 1e-12));
  EXPECT_FALSE(torch::allclose(a.slice(1, 3, 5), b.slice(1, 3, 5), 1e-6, 1e-8));
}

INSTANTIATE_TEST_SUITE_P(AllSchemes, Masks, ::testing::ValuesIn(scheme_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
