// model::linear and linear_relu inside a PackedWeights scope (oneDNN on weights packed once)
// against a float64 product computed here, in float32 and in bf16 under a precision guard; and the cases that
// must take ATen's linear instead (gradients on, float64, a weight that is not the module's).
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "model/linear.h"
#include "two_layers.h"
#include "model/precision.h"

using namespace normlab;

namespace {

using test::TwoLayers;

// x Wᵀ + b in float64 from the operands as the product sees them (rounded to `dtype` first).
torch::Tensor reference(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Dtype dtype) {
  auto r = [&](const torch::Tensor& t) { return t.to(dtype).to(torch::kFloat64); };
  auto y = torch::matmul(r(x), r(w).t());
  return b.defined() ? y + r(b) : y;
}

// Largest |y - ref| over the largest |ref|.
double relative_error(const torch::Tensor& y, const torch::Tensor& ref) {
  return (y.to(torch::kFloat64) - ref).abs().max().item<double>() / ref.abs().max().item<double>();
}

bool fp32_packed_here() { return core::runtime_info().cpu_capability == "AVX512"; }
// oneDNN's bf16 reorder needs AVX-512 BW, VL and DQ; elsewhere bf16 takes at::linear.
bool bf16_packed_here() {
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

TEST(PackedWeights, EqualsTheProductInFloat32AndBf16) {
  torch::manual_seed(3);
  TwoLayers m;
  torch::NoGradGuard no_grad;
  for (const bool bf16 : {false, true}) {
    model::PackedWeights packed(m);
    model::PrecisionGuard guard(bf16 ? model::Precision::kBf16 : model::Precision::kFp32, torch::kCPU);
    const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat32;
    const double tol = bf16 ? 1e-2 : 1e-5;  // bf16: 8 mantissa bits in the output
    for (const auto& shape : {std::vector<int64_t>{37, 96}, std::vector<int64_t>{11, 1, 96}}) {
      auto x = torch::randn(shape);
      for (const auto* layer : {&m.with_bias, &m.without_bias}) {
        auto y = model::linear(*layer, x);
        EXPECT_EQ(y.scalar_type(), dtype);
        auto expected_sizes = shape;
        expected_sizes.back() = (*layer)->weight.size(0);
        EXPECT_EQ(y.sizes().vec(), expected_sizes);
        const auto expected = reference(x, (*layer)->weight, (*layer)->bias, dtype);
        EXPECT_LT(relative_error(y, expected), tol) << (bf16 ? "bf16 " : "fp32 ") << shape.size() << "-D";
        EXPECT_LT(relative_error(model::linear_relu(*layer, x), expected.clamp_min(0)), tol)
            << "relu " << (bf16 ? "bf16 " : "fp32 ") << shape.size() << "-D";
      }
    }
    // Each weight once per dtype, however often it is used.
    EXPECT_EQ(packed.packed(), (bf16 ? bf16_packed_here() : fp32_packed_here()) ? 2u : 0u) << (bf16 ? "bf16" : "fp32");
    auto empty = model::linear(m.with_bias, torch::randn({0, 96}));
    EXPECT_EQ(empty.sizes(), (torch::IntArrayRef{0, 200}));
  }
}

TEST(PackedWeights, AtenLinearWhereThePackedPathDoesNotApply) {
  torch::manual_seed(4);
  TwoLayers m;
  auto x = torch::randn({5, 96});
  {
    model::PackedWeights packed(m);
    auto y = model::linear(m.with_bias, x);  // gradients on: ATen's, differentiable
    EXPECT_TRUE(y.requires_grad());
    EXPECT_LT(relative_error(y.detach(), reference(x, m.with_bias->weight, m.with_bias->bias, torch::kFloat32)), 1e-5);
    torch::NoGradGuard no_grad;
    // A weight made per call (attention's stacked projections) is not one of the module's.
    auto stacked = torch::cat({m.with_bias->weight, m.with_bias->weight});
    auto z = model::linear(x, stacked);
    EXPECT_LT(relative_error(z, reference(x, stacked, {}, torch::kFloat32)), 1e-5);
    {
      model::PackedWeights inner(m);  // defers to the outer scope
      model::linear(m.with_bias, x);
      EXPECT_EQ(inner.packed(), 0u);
    }
    EXPECT_EQ(packed.packed(), fp32_packed_here() ? 1u : 0u);
  }
  m.to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  model::PackedWeights packed(m);
  auto x64 = x.to(torch::kFloat64);
  auto y = model::linear(m.with_bias, x64);
  EXPECT_EQ(y.scalar_type(), torch::kFloat64);
  EXPECT_LT(relative_error(y, reference(x64, m.with_bias->weight, m.with_bias->bias, torch::kFloat64)), 1e-12);
  EXPECT_EQ(packed.packed(), 0u);
}

}  // namespace
