// Log-scale histograms of the first-steps trace against counting by hand.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "analysis/logit_trace.h"
#include "analysis/trace.h"
#include "core/tokens.h"
#include "model/seq2seq.h"
#include "../model/tiny_model.h"

namespace normlab::analysis {
namespace {

TEST(LogHistogram, BinsCountedByHand) {
  train::TraceConfig c;  // [1e-16, 1e4), 10 bins per decade: bin k covers log10|v| in [-16 + k/10, ...)
  const double inf = std::numeric_limits<double>::infinity();
  auto v = torch::tensor({0.0, -0.0, 3e-5, -3.5e-5, 0.5, 2.5e3, 1e-20, 2e4, inf, std::nan(""), 7e-2},
                         torch::kFloat64);
  const auto h = log_histogram(v, c);
  EXPECT_EQ(h.zeros, 2);
  EXPECT_EQ(h.underflow, 1);  // 1e-20
  EXPECT_EQ(h.overflow, 3);   // 2e4, inf, nan
  ASSERT_EQ(h.counts.size(), 200u);
  // log10(3e-5) = -4.52, log10(3.5e-5) = -4.46: bins 114 and 115; log10(0.5) = -0.30: bin 156;
  // log10(2500) = 3.398: bin 193; log10(0.07) = -1.15: bin 148.
  std::vector<int64_t> expected(200, 0);
  expected[114] = expected[115] = expected[156] = expected[193] = expected[148] = 1;
  EXPECT_EQ(h.counts, expected);
}

TEST(LogHistogram, CountsSumToTheElementCount) {
  torch::manual_seed(1);
  auto v = torch::randn({37, 53}) * torch::pow(10.0, torch::randint(-20, 6, {37, 53}).to(torch::kFloat32));
  v.index_put_({torch::rand({37, 53}) < 0.1}, 0.0);
  train::TraceConfig c;
  const auto h = log_histogram(v, c);
  int64_t total = h.zeros + h.underflow + h.overflow;
  for (auto n : h.counts) total += n;
  EXPECT_EQ(total, v.numel());
  // The CSV rows hold the same counts.
  const auto rows = histogram_rows(h, c, "1,p,grad");
  int64_t from_rows = 0;
  std::stringstream s(rows);
  for (std::string line; std::getline(s, line);) from_rows += std::stoll(line.substr(line.rfind(',') + 1));
  EXPECT_EQ(from_rows, v.numel());
  EXPECT_EQ(rows.rfind("1,p,grad,-inf,-inf,", 0), 0u);  // the zero bin first
}

}  // namespace
}  // namespace normlab::analysis

namespace normlab::analysis {

// --trace-logits against the scores computed here by hand from the weights: encoder layer 0 of
// a Pre-LN model (its self-attention reads N(x), x the embedding output, seen through the
// block's ln_input hook), q = N(x) Wq^T + bq and k alike, per head q.k / sqrt(D) over the
// non-padding keys; and log Z as log(sum exp) of the logits in float64.
TEST(LogitTracer, AttentionLogitsAndLogZAgainstHandComputation) {
  auto c = test::tiny_config("pre-ln");
  c.dropout = c.attention_dropout = c.activation_dropout = 0.0;
  model::Seq2Seq net(c);
  model::initialize(net, 4);
  const auto dir = std::filesystem::temp_directory_path() / ("normlab_logit_trace_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  torch::manual_seed(2);
  auto src = torch::randint(4, 30, {2, 6}, torch::kLong);
  src.index_put_({1, torch::indexing::Slice(4, torch::indexing::None)}, kPad);
  auto prev = torch::randint(4, 30, {2, 5}, torch::kLong), target = torch::randint(4, 30, {2, 5}, torch::kLong);
  target.index_put_({0, 4}, kPad);
  auto* layer0 = net->encoder->layers[0]->as<model::EncoderLayerImpl>();
  torch::Tensor x;
  layer0->self_attn_block.set_observer([&](const char* what, const torch::Tensor& t) {
    if (std::string(what) == "ln_input") x = t.detach();
  });
  torch::Tensor logits;
  {
    LogitTracer tracer(net, dir.string(), 0);
    net->train();
    logits = net->forward(src, prev);
    tracer.output(logits, target);
    tracer.end(1);
  }
  layer0->self_attn_block.set_observer(nullptr);
  // By hand.
  torch::NoGradGuard no_grad;
  const auto h = layer0->self_attn_block.norm()->forward(x).to(torch::kDouble);
  auto& a = layer0->self_attn;
  auto proj = [&](torch::nn::Linear& l) { return h.matmul(l->weight.to(torch::kDouble).t()) + l->bias.to(torch::kDouble); };
  const auto q = proj(a->q_proj), k = proj(a->k_proj);  // (B,S,C)
  const int64_t H = c.heads, D = c.d_model / c.heads;
  std::vector<double> expected(H, 0.0);
  for (int64_t head = 0; head < H; ++head) {
    const auto qh = q.narrow(2, head * D, D), kh = k.narrow(2, head * D, D);
    auto s = qh.matmul(kh.transpose(1, 2)).abs() / std::sqrt(static_cast<double>(D));  // (B,S,S)
    s = s.masked_fill(src.eq(kPad).unsqueeze(1), 0.0);
    expected[head] = s.max().item<double>();
  }
  const auto log_z = logits.to(torch::kDouble).exp().sum(-1).log().masked_select(target.ne(kPad));
  // Read back.
  std::ifstream in(dir / "attention_logits.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step,stack,layer,attention,head,max_logit");
  int rows = 0, matched = 0;
  while (std::getline(in, line)) {
    ++rows;
    if (line.rfind("1,encoder,0,self_attn,", 0) != 0) continue;
    ++matched;
    const auto head = std::stoll(line.substr(22, line.find(',', 22) - 22));
    const double got = std::stod(line.substr(line.rfind(',') + 1));
    EXPECT_NEAR(got, expected[head], 1e-5 * expected[head]) << line;
  }
  EXPECT_EQ(matched, H);
  EXPECT_EQ(rows, H * (2 + 2 * 2));  // 2 encoder self-attentions, 2 decoder layers x 2 attentions
  std::ifstream out(dir / "output_logits.csv");
  std::getline(out, line);
  std::getline(out, line);
  double step, mean, max;
  char comma;
  std::istringstream(line) >> step >> comma >> mean >> comma >> max;
  EXPECT_EQ(step, 1);
  EXPECT_NEAR(mean, log_z.mean().item<double>(), 1e-5);
  EXPECT_NEAR(max, log_z.max().item<double>(), 1e-5);
  std::filesystem::remove_all(dir);
}

}  // namespace normlab::analysis
