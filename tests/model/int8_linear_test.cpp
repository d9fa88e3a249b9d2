// int8 decoding's linear layers (model/int8_linear.h) inside an int8 PackedWeights scope, against
// a float64 product computed here from weights quantised here (per row, max |w_n| / 127): the
// error left is the activations' quantisation, bounded by half a step (2/255 of the row's
// max |x|, 2/127 without AVX-512 VNNI) times the sum of |w| of the output. And what stays float:
// gradients on, weights that are not the module's; and the precision's parsing and refusals.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include "model/int8_linear.h"
#include "model/linear.h"
#include "two_layers.h"
#include "model/precision.h"

using namespace normlab;

namespace {

using test::TwoLayers;

// CTranslate2's weight quantisation, float64: round(w / s) * s with s = max |w_n| / 127.
torch::Tensor dequantised(const torch::Tensor& w) {
  const auto w64 = w.to(torch::kFloat64);
  const auto s = w64.abs().amax(1, true) / 127;
  return torch::round(w64 / s) * s;
}

// x (M,K) rows of very different sizes, one row of zeros.
torch::Tensor inputs(int64_t m, int64_t k) {
  auto x = torch::randn({m, k}) * torch::exp(torch::randn({m, 1}) * 2);
  x[1].zero_();
  return x;
}

double activation_step() { return __builtin_cpu_supports("avx512vnni") ? 2.0 / 255 : 2.0 / 127; }

TEST(Int8Linear, WithinHalfAnActivationStepOfTheDequantisedProduct) {
  if (!model::int8_available()) GTEST_SKIP() << "LibTorch without fbgemm";
  torch::manual_seed(4);
  TwoLayers m;
  torch::NoGradGuard no_grad;
  model::PackedWeights packed(m, model::Precision::kInt8);
  const auto x = inputs(37, 96);
  const auto x64 = x.to(torch::kFloat64);
  for (const auto* layer : {&m.with_bias, &m.without_bias}) {
    const auto& b = (*layer)->bias;
    const auto w = dequantised((*layer)->weight);
    auto ref = torch::matmul(x64, w.t());
    if (b.defined()) ref += b.to(torch::kFloat64);
    // |x_q - x| <= step/2 * max|x_row| per element; float32 rounding of the rest on top.
    const auto bias = b.defined() ? b : torch::zeros({w.size(0)});
    const auto bound = x64.abs().amax(1, true) * (activation_step() / 2) * w.abs().sum(1).unsqueeze(0) +
                       1e-5 * (torch::matmul(x64.abs(), w.abs().t()) + bias.abs().to(torch::kFloat64));
    for (const bool relu : {false, true}) {
      const auto y = relu ? model::linear_relu(*layer, x) : model::linear(*layer, x);
      const auto expected = relu ? ref.clamp_min(0) : ref;
      EXPECT_EQ(y.scalar_type(), torch::kFloat32);
      EXPECT_LE(((y.to(torch::kFloat64) - expected).abs() - bound).max().item<double>(), 0.0);
      // int8 indeed: the float32 product is not what came out.
      const auto fp32 = torch::linear(x, (*layer)->weight, b);
      EXPECT_GT((y.to(torch::kFloat64) - (relu ? fp32.clamp_min(0) : fp32)).abs().max().item<double>(), 1e-3);
      // A row of zeros gives the bias exactly.
      EXPECT_TRUE(torch::equal(y[1], relu ? bias.clamp_min(0) : bias));
    }
  }
  EXPECT_EQ(packed.packed(), 2u);  // each weight quantised once
}

TEST(Int8Linear, ARowsResultDoesNotDependOnTheOtherRows) {
  if (!model::int8_available()) GTEST_SKIP() << "LibTorch without fbgemm";
  torch::manual_seed(5);
  TwoLayers m;
  torch::NoGradGuard no_grad;
  model::PackedWeights packed(m, model::Precision::kInt8);
  const auto x = inputs(9, 96).view({9, 1, 96});  // (N,1,C) as a decoding step's input
  const auto batch = model::linear(m.with_bias, x);
  EXPECT_EQ(batch.sizes().vec(), (std::vector<int64_t>{9, 1, 200}));
  for (int64_t i = 0; i < 9; ++i) EXPECT_TRUE(torch::equal(batch[i], model::linear(m.with_bias, x.narrow(0, i, 1))[0]));
}

TEST(Int8Linear, GradientsAndForeignWeightsStayFloat) {
  if (!model::int8_available()) GTEST_SKIP() << "LibTorch without fbgemm";
  torch::manual_seed(6);
  TwoLayers m;
  model::PackedWeights packed(m, model::Precision::kInt8);
  const auto x = torch::randn({5, 96});
  EXPECT_FALSE(model::PackedWeights::int8_now());  // gradients on
  EXPECT_TRUE(torch::allclose(model::linear(m.with_bias, x), torch::linear(x, m.with_bias->weight, m.with_bias->bias)));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(model::PackedWeights::int8_now());
  const auto foreign = m.with_bias->weight.clone();
  EXPECT_TRUE(torch::equal(model::linear(x, foreign), torch::linear(x, foreign)));
  EXPECT_EQ(packed.packed(), 0u);
}

TEST(Int8Precision, ParsedForDecodingOnlyOnTheCpuWithFloat32Weights) {
  EXPECT_EQ(model::parse_precision("int8"), model::Precision::kInt8);
  EXPECT_EQ(model::to_string(model::Precision::kInt8), "int8");
  EXPECT_EQ(model::compute_dtype(model::Precision::kInt8), torch::kFloat32);
  const bool fbgemm = model::int8_available();
  const auto problems = [](const c10::Device& device, torch::Dtype master, bool decoding) {
    return model::precision_problems(model::Precision::kInt8, device, master, decoding).size();
  };
  EXPECT_EQ(problems(torch::kCPU, torch::kFloat, true), fbgemm ? 0u : 1u);
  EXPECT_EQ(problems(torch::kCPU, torch::kFloat, false), 1u);  // training, scoring, probing
  EXPECT_GE(problems(c10::Device(c10::kCUDA, 0), torch::kFloat, true), 1u);
  EXPECT_GE(problems(torch::kCPU, torch::kFloat64, true), 1u);
  model::PrecisionGuard guard(model::Precision::kInt8, torch::kCPU);  // no autocast: int8 is not its
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
}

}  // namespace
