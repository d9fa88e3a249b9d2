// The criterion (train::loss) against cross entropy written independently with torch ops on the
// model's logits: LibTorch's cross_entropy (its label_smoothing is the uniform formula), the
// exclusive formula as a dense target distribution, the z-loss from logsumexp.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/tokens.h"
#include "data/batch.h"
#include "model/encoder_only.h"
#include "model/seq2seq.h"
#include "train/criterion.h"
#include "../model/tiny_model.h"

using namespace normlab;
namespace F = torch::nn::functional;

namespace {

// A float64 tiny model with dropout off, so that two forwards give the same logits.
model::Seq2Seq eval_model() {
  model::Seq2Seq net(test::tiny_config("pre-ln"));
  net->to(torch::kFloat64);
  model::initialize(net, 3);
  net->eval();
  return net;
}

// Three pairs of different lengths: padding in src and target. Target tokens: 3 + 5 + 2 = 10
// (each sentence and its </s>).
data::Batch padded_batch() {
  const std::vector<data::Sentence> src{{5, 6, 7}, {8, 9}, {10, 11, 12, 13}};
  const std::vector<data::Sentence> tgt{{14, 15}, {16, 17, 18, 19}, {20}};
  return data::make_batch(src, tgt, 0, src.size());
}
constexpr int64_t kTargetTokens = 10;

// The logits (N,V) and targets (N) of the batch's positions, on the CPU, computed here.
std::pair<torch::Tensor, torch::Tensor> flat_logits(model::Seq2Seq& net, const data::Batch& b) {
  auto logits = net->forward(b.src, b.prev_output_tokens);  // (B,T,V)
  return {logits.reshape({-1, logits.size(-1)}), b.target.reshape(-1)};
}

// -sum over non-padding positions of sum_v q_v log p_v, q_v = on_target at the target, else
// off_target.
torch::Tensor dense_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target, double on_target,
                                  double off_target) {
  const auto lp = torch::log_softmax(logits, -1);  // (N,V)
  const auto q = torch::full_like(lp, off_target).scatter(1, target.unsqueeze(1), on_target);
  return -(q * lp).sum(1).masked_select(target.ne(kPad)).sum();
}

TEST(Criterion, UniformIsCrossEntropyWithLabelSmoothing) {
  auto net = eval_model();
  const auto b = padded_batch();
  const auto got = train::loss(net, b, train::LossOptions{0.1, train::LabelSmoothingFormula::kUniform, 0.0});
  const auto [logits, target] = flat_logits(net, b);
  const auto ce = F::cross_entropy(
      logits, target, F::CrossEntropyFuncOptions().ignore_index(kPad).label_smoothing(0.1).reduction(torch::kSum));
  const auto nll =
      F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().ignore_index(kPad).reduction(torch::kSum));
  EXPECT_EQ(got.sums.tokens, kTargetTokens);
  EXPECT_NEAR(got.sums.loss.item<double>(), ce.item<double>(), 1e-12);
  EXPECT_NEAR(got.sums.nll.item<double>(), nll.item<double>(), 1e-12);
  EXPECT_TRUE(torch::allclose(got.logits.reshape({-1, got.logits.size(-1)}), logits, 0, 1e-14));
}

TEST(Criterion, ExclusiveGivesTheTargetOneMinusEps) {
  auto net = eval_model();
  const auto b = padded_batch();
  const double eps = 0.2;
  const auto got = train::loss(net, b, train::LossOptions{eps, train::LabelSmoothingFormula::kExclusive, 0.0});
  const auto [logits, target] = flat_logits(net, b);
  const double V = static_cast<double>(logits.size(1));
  EXPECT_NEAR(got.sums.loss.item<double>(), dense_cross_entropy(logits, target, 1 - eps, eps / (V - 1)).item<double>(),
              1e-12);
  EXPECT_NEAR(got.sums.nll.item<double>(), dense_cross_entropy(logits, target, 1, 0).item<double>(), 1e-12);
}

TEST(Criterion, ZLossAddsCLogZSquaredToTheLossOnly) {
  auto net = eval_model();
  const auto b = padded_batch();
  const double C = 0.01;
  const auto got = train::loss(net, b, train::LossOptions{0.1, train::LabelSmoothingFormula::kUniform, C});
  const auto [logits, target] = flat_logits(net, b);
  const auto log_z = torch::log(torch::exp(logits).sum(1));  // (N)
  const auto z = (log_z.pow(2)).masked_select(target.ne(kPad)).sum();
  const auto ce = F::cross_entropy(
      logits, target, F::CrossEntropyFuncOptions().ignore_index(kPad).label_smoothing(0.1).reduction(torch::kSum));
  EXPECT_NEAR(got.sums.loss.item<double>(), (ce + C * z).item<double>(), 1e-12);
  EXPECT_NEAR(got.sums.nll.item<double>(), dense_cross_entropy(logits, target, 1, 0).item<double>(), 1e-12);
}

// The loss is differentiable through the model: the same gradients as LibTorch's cross entropy.
TEST(Criterion, GradientIsCrossEntropysGradient) {
  auto net = eval_model();
  const auto b = padded_batch();
  train::loss(net, b, train::LossOptions{}).sums.loss.backward();
  std::vector<torch::Tensor> got;
  for (const auto& p : net->parameters()) got.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  net->zero_grad();
  const auto [logits, target] = flat_logits(net, b);
  F::cross_entropy(logits, target,
                   F::CrossEntropyFuncOptions().ignore_index(kPad).label_smoothing(0.1).reduction(torch::kSum))
      .backward();
  const auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(got[i].defined(), params[i].grad().defined()) << i;
    if (got[i].defined()) {
      EXPECT_TRUE(torch::allclose(got[i], params[i].grad(), 1e-10, 1e-12)) << i;
    }
  }
}

// A batch on the CPU and the model on a GPU: the batch follows the model.
TEST(Criterion, MovesTheBatchToTheModelsDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto net = eval_model();
  const auto b = padded_batch();
  const auto cpu = train::loss(net, b, train::LossOptions{}).sums.loss.item<double>();
  net->to(torch::Device(torch::kCUDA, 0));
  const auto got = train::loss(net, b, train::LossOptions{});
  EXPECT_TRUE(got.logits.is_cuda());
  EXPECT_NEAR(got.sums.loss.item<double>(), cpu, 1e-10 * cpu);
}

// A classifier's loss: one target per example, class 1 (kPad's id) counted like any other; the
// logits the head of RoBERTa's form gives on the encoder's output at <s>, computed here from its
// layers; segment 1 after the first </s>.
TEST(Criterion, ClassifierCountsEveryClassAndReadsTheFirstPosition) {
  auto c = test::tiny_config("post-ln");
  c.kind = model::kEncoderOnly;
  c.decoder_layers = 0;
  c.segment_types = 2;
  c.classes = 3;
  model::EncoderOnly net(c);
  net->to(torch::kFloat64);
  model::initialize(net, 4);
  net->eval();
  const std::vector<data::Sentence> rows{{kBos, 5, 6, kEos, 7, 8, 9, kEos}, {kBos, 10, kEos}, {kBos, 11, 12, kEos, 13, kEos}};
  const std::vector<data::Sentence> labels{{1}, {0}, {2}};
  const auto b = data::gather_batch(rows, labels, {0, 1, 2}, data::Layout::kClassify);
  const auto segments = torch::tensor({0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0},
                                      torch::kInt64).view({3, 8});
  ASSERT_TRUE(torch::equal(b.segments, segments));
  const auto got = train::loss(net, b, train::LossOptions{0.0});
  EXPECT_EQ(got.sums.tokens, 3);
  auto& head = *net->classification_head;
  const auto x0 = net->encoder(b.src, segments).out.select(1, 0);  // (B,C)
  const auto logits = torch::linear(torch::tanh(torch::linear(x0, head.dense->weight, head.dense->bias)),
                                    head.out_proj->weight, head.out_proj->bias);
  const auto ce = F::cross_entropy(logits, torch::tensor({1, 0, 2}), F::CrossEntropyFuncOptions().reduction(torch::kSum));
  EXPECT_NEAR(got.sums.nll.item<double>(), ce.item<double>(), 1e-12);
  EXPECT_EQ(got.logits.sizes(), (std::vector<int64_t>{3, 1, 3}));
}

TEST(Criterion, ProblemsNameTheOptions) {
  EXPECT_TRUE(train::LossOptions{}.problems().empty());
  const auto p = train::LossOptions{1.0, train::LabelSmoothingFormula::kUniform, -1.0}.problems();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].rfind("--label-smoothing must be in [0, 1)", 0), 0u) << p[0];
  EXPECT_EQ(p[1].rfind("--z-loss must be >= 0", 0), 0u) << p[1];
}

}  // namespace
