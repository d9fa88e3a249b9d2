// The decoding cache against full recomputation, in the way beam search uses it: a sentence's
// beams in consecutive rows reading its encoder keys and values together, beams taking over
// other beams' prefixes, steps without a reordering (greedy), a finished sentence dropped, and
// 70 steps (the buffers grow); float32 steps with the weights packed as beam search runs them.
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/seq2seq.h"
#include "model/linear.h"
#include "tiny_model.h"

using namespace normlab;

namespace {

torch::Tensor ids(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return torch::tensor(flat).view({static_cast<int64_t>(rows.size()), -1});
}

TEST(DecoderCache, BeamsReorderDropAndGrowAsFullRecomputation) {
  constexpr int64_t kBeam = 3, kSteps = 70;  // > the first allocation's 64 positions
  for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const double tol = dtype == torch::kFloat64 ? 1e-10 : 5e-5;
    model::Seq2Seq m(test::tiny_config("pre-ln"));
    m->to(dtype);
    model::initialize(m, 7);
    m->eval();
    torch::NoGradGuard no_grad;
    const std::vector<std::vector<int64_t>> src = {{5, 6, 7, 8, kEos}, {9, 10, kEos, kPad, kPad}};
    auto cache = m->decoder->start_decoding(m->encoder(ids(src)), kSteps);
    // Per decoder row: its sentence and the tokens fed so far.
    std::vector<int64_t> sentence = {0, 0, 0, 1, 1, 1};
    std::vector<std::vector<int64_t>> prefix(sentence.size(), std::vector<int64_t>{kEos});
    for (int64_t t = 0; t < kSteps; ++t) {
      if (t > 0)  // the rows' newest tokens
        for (size_t r = 0; r < prefix.size(); ++r) prefix[r].push_back(4 + (7 * t + 3 * static_cast<int64_t>(r)) % 25);
      if (t > 0 && t % 5 != 1) {  // a reordering as beam search makes them (none every 5th step)
        std::vector<int64_t> rows;
        torch::Tensor kept;
        if (t == 40) {  // sentence 0 finished: its rows leave, sentence 1's beams reorder
          rows = {5, 3, 3};
          kept = torch::tensor(std::vector<int64_t>{1});
        } else if (sentence.size() == 6) {
          rows = t % 3 == 0 ? std::vector<int64_t>{2, 0, 0, 4, 4, 3} : std::vector<int64_t>{0, 1, 2, 3, 4, 5};
        } else {
          rows = t % 2 == 0 ? std::vector<int64_t>{1, 1, 0} : std::vector<int64_t>{2, 0, 1};
        }
        std::vector<int64_t> new_sentence;
        std::vector<std::vector<int64_t>> new_prefix;
        for (auto r : rows) {
          new_sentence.push_back(sentence[static_cast<size_t>(r)]);
          new_prefix.push_back(prefix[static_cast<size_t>(r)]);
        }
        sentence = new_sentence;
        prefix = new_prefix;
        cache.reorder(torch::tensor(rows), kept);
      }
      std::vector<int64_t> newest;
      std::vector<std::vector<int64_t>> rows_src;
      for (size_t r = 0; r < prefix.size(); ++r) {
        newest.push_back(prefix[r].back());
        rows_src.push_back(src[static_cast<size_t>(sentence[r])]);
      }
      torch::Tensor step;  // (N,V)
      {
        model::PackedWeights packed(*m);  // as beam_search runs the steps (model/linear.h)
        step = m->decoder->forward_step(torch::tensor(newest).view({-1, 1}), cache);
      }
      auto full = m->forward(ids(rows_src), ids(prefix)).select(1, t);
      ASSERT_EQ(step.sizes(), full.sizes()) << "step " << t;
      EXPECT_LT((step - full).abs().max().item<double>(), tol) << "step " << t << " dtype " << dtype;
    }
    EXPECT_EQ(cache.steps(), kSteps);
    EXPECT_THROW(m->decoder->forward_step(torch::full({kBeam, 1}, 5, torch::kInt64), cache), c10::Error);
  }
}

}  // namespace
