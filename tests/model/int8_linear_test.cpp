// int8 decoding's linear layers (model/int8_linear.h) inside an int8 PackedWeights scope, against
// a float64 product computed here from weights quantised here (per row, max |w_n| / 127): the
// error left is the activations' quantisation, bounded by half a step (2/255 of the row's
// max |x|, 2/127 without AVX-512 VNNI) times the sum of |w| of the output. And what stays float:
// gradients on, weights that are not the module's; and the precision's parsing and refusals.
// And against PyTorch's own int8 product (quantized::linear_dynamic) on the rows scaled to
// max |x| = 1 with a row fixing the range: the composition int8_linear fuses, bit for bit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>

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

torch::Tensor call(const char* name, std::vector<c10::IValue> args) {
  c10::Dispatcher::singleton().findSchemaOrThrow(name, "").callBoxed(&args);
  return args.front().toTensor();
}

// relu(x wᵀ + b) in PyTorch's operators: w per channel to qint8 (scale max |w_n| / 127), packed
// by fbgemm; each row of x divided by its max |x|, one more row (1, -1, 0, ...) so that the
// dynamic quantisation's range is [-1, 1]; quantized::linear_dynamic; times the rows' max |x|
// (at::addcmul with the bias).
torch::Tensor pytorch_int8(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool relu) {
  const auto amax = w.abs().amax(1);
  const auto scales = torch::where(amax > 0, amax / 127, torch::ones_like(amax)).to(torch::kDouble);
  const auto q = at::quantize_per_channel(w, scales, torch::zeros({w.size(0)}, torch::kLong), 0, torch::kQInt8);
  const auto was = at::globalContext().qEngine();
  at::globalContext().setQEngine(at::QEngine::FBGEMM);
  std::vector<c10::IValue> pack{q, c10::IValue()};
  c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "").callBoxed(&pack);
  at::globalContext().setQEngine(was);
  const auto norm = x.abs().amax(1, true).clamp_min(std::numeric_limits<float>::min());
  auto sentinel = torch::zeros({1, x.size(1)});
  sentinel[0][0] = 1;
  sentinel[0][1] = -1;
  const auto y = call("quantized::linear_dynamic", {torch::cat({x / norm, sentinel}), pack.front(),
                                                    !__builtin_cpu_supports("avx512vnni")})
                     .narrow(0, 0, x.size(0));
  auto out = b.defined() ? torch::addcmul(b, y, norm) : y * norm;
  return relu ? out.relu() : out;
}

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

TEST(Int8Linear, EqualsPyTorchsDynamicProductOnScaledRows) {
  if (!model::int8_available()) GTEST_SKIP() << "LibTorch without fbgemm";
  torch::manual_seed(7);
  TwoLayers m;
  torch::NoGradGuard no_grad;
  model::PackedWeights packed(m, model::Precision::kInt8);
  for (const int64_t rows : {1, 5, 37, 300}) {
    const auto x = inputs(rows + 1, 96).narrow(0, 1, rows).contiguous();  // 1 row: no zero row
    for (const auto* layer : {&m.with_bias, &m.without_bias})
      for (const bool relu : {false, true}) {
        const auto y = relu ? model::linear_relu(*layer, x) : model::linear(*layer, x);
        const auto expected = pytorch_int8(x, (*layer)->weight, (*layer)->bias, relu);
        EXPECT_TRUE(torch::equal(y, expected)) << rows << " rows, relu " << relu << ", bias " << (*layer)->bias.defined() << ": largest difference "
                                               << (y - expected).abs().max().item<float>();
      }
  }
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
