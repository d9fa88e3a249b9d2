// Mixed precision (model/precision.h): the guard turns autocast on and off, a weight changed
// between two guards is cast afresh, bf16 dropout keeps fp32's mask and exact scale, and the
// loss of bf16 logits is computed in fp32. The whole model in bf16 against float64 and
// PyTorch AMP: tests/reference/check_score.py --precision bf16.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "core/tokens.h"
#include "model/dropout.h"
#include "model/seq2seq.h"
#include "model/precision.h"
#include "tiny_model.h"
#include "train/loss.h"

using namespace normlab;

// /proc/cpuinfo texts of the three kinds of x86 machine these sessions run on (flags shortened).
TEST(Precision, NativeBf16IsReadFromTheCpuFlags) {
  const std::string xeon = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n";
  const std::string epyc_avx512 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n";
  const std::string epyc_avx2 = "processor\t: 0\nflags\t\t: fpu avx2 fma\nbugs\t\t: sysret_ss_attrs\n";
  EXPECT_EQ(core::native_bf16_in_cpuinfo(xeon), "amx_bf16");
  EXPECT_EQ(core::native_bf16_in_cpuinfo(epyc_avx512), "avx512_bf16");
  EXPECT_EQ(core::native_bf16_in_cpuinfo(epyc_avx2), "");
  EXPECT_EQ(core::native_bf16_in_cpuinfo("flags\t\t: avx512_bf16x\n"), "");  // whole words only
  EXPECT_EQ(core::native_bf16_in_cpuinfo(""), "");
  // Faster than fp32 (what auto follows): AMX; AVX512_BF16 on AMD, not on an Intel CPU without AMX
  // (the Xeon of 2026-11-29, whose VM hides AMX: bf16 183 against fp32 296 GFLOP/s, 2048^3).
  const std::string intel = "vendor_id\t: GenuineIntel\n";
  const std::string amd = "vendor_id\t: AuthenticAMD\n";
  EXPECT_TRUE(core::bf16_faster_in_cpuinfo(intel + xeon));
  EXPECT_TRUE(core::bf16_faster_in_cpuinfo(amd + epyc_avx512));
  EXPECT_FALSE(core::bf16_faster_in_cpuinfo(intel + epyc_avx512));
  EXPECT_FALSE(core::bf16_faster_in_cpuinfo(amd + epyc_avx2));
  EXPECT_FALSE(core::bf16_faster_in_cpuinfo(""));
  // auto on CUDA is bf16 whatever the CPU; on the CPU it follows this machine's flags.
  EXPECT_EQ(model::parse_precision("auto", c10::Device(c10::kCUDA, 0)), model::Precision::kBf16);
  EXPECT_EQ(model::parse_precision("auto", torch::kCPU),
            core::cpu_bf16_faster() ? model::Precision::kBf16 : model::Precision::kFp32);
  EXPECT_EQ(model::precision_warning(model::Precision::kBf16, torch::kCPU).empty(), core::cpu_bf16_faster());
  EXPECT_TRUE(model::precision_warning(model::Precision::kFp32, torch::kCPU).empty());
}

TEST(Precision, NamesRoundTripAndUnknownOnesNameTheOption) {
  for (auto p : {model::Precision::kFp32, model::Precision::kBf16, model::Precision::kFp16})
    EXPECT_EQ(model::parse_precision(model::to_string(p)), p);
  try {
    model::parse_precision("fp8");
    FAIL() << "fp8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--precision: unknown value 'fp8'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(model::precision_problems(model::Precision::kBf16, torch::kCPU).empty());
  EXPECT_EQ(model::precision_problems(model::Precision::kFp16, torch::kCPU).size(), 1u);
  EXPECT_EQ(model::precision_problems(model::Precision::kBf16, torch::kCPU, torch::kFloat64).size(), 1u);
}

TEST(Precision, GuardRunsProductsInBf16AndRestoresTheState) {
  auto x = torch::randn({4, 8});
  auto w = torch::randn({3, 8});
  {
    model::PrecisionGuard bf16(model::Precision::kBf16, torch::kCPU);
    auto y = torch::linear(x, w);
    EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
    // The product of the bf16-rounded operands, not of the fp32 ones.
    auto expected = torch::linear(x.to(torch::kBFloat16).to(torch::kFloat64), w.to(torch::kBFloat16).to(torch::kFloat64));
    EXPECT_TRUE(torch::allclose(y.to(torch::kFloat64), expected, 1e-2, 1e-2));
    {
      model::PrecisionGuard fp32(model::Precision::kFp32, torch::kCPU);  // a no-op inside
      EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    }
    EXPECT_EQ(torch::softmax(x, -1).scalar_type(), torch::kFloat);  // not a product: fp32 stays fp32
  }
  EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kFloat);
}

TEST(Precision, AWeightChangedBetweenGuardsIsCastAfresh) {
  // Autocast caches the bf16 copy of a leaf weight for the guard's life; a stale copy after an
  // optimiser step would train on old weights. The outermost guard's end must drop the cache.
  auto x = torch::ones({1, 4});
  auto w = torch::ones({2, 4}, torch::requires_grad());
  auto product = [&] {
    model::PrecisionGuard g(model::Precision::kBf16, torch::kCPU);
    return torch::linear(x, w).to(torch::kFloat).sum().item<double>();
  };
  EXPECT_EQ(product(), 8.0);
  {
    torch::NoGradGuard no_grad;
    w.mul_(2.0);
  }
  EXPECT_EQ(product(), 16.0);
}

TEST(Precision, Bf16DropoutKeepsTheFp32MaskAndScalesInFloat) {
  const double p = 0.3;
  auto x = torch::randn({1000});
  torch::manual_seed(4);
  auto y32 = model::dropout(x, p, true);
  torch::manual_seed(4);
  auto y16 = model::dropout(x.to(torch::kBFloat16), p, true);
  ASSERT_EQ(y16.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y16.ne(0), y32.ne(0)));
  // Each kept element is bf16(float(bf16(x)) / (1 - p)): the scale is not rounded to bf16 first.
  auto xb = x.to(torch::kBFloat16).to(torch::kFloat);
  auto expected = (xb * static_cast<float>(1.0 / (1.0 - p))).to(torch::kBFloat16).masked_fill(y32.eq(0), 0);
  EXPECT_TRUE(torch::equal(y16, expected));
}

TEST(Precision, LossOfBf16LogitsIsComputedInFp32) {
  torch::manual_seed(5);
  auto logits = torch::randn({2, 3, 50}).to(torch::kBFloat16);
  auto target = torch::tensor(std::vector<int64_t>{5, 6, kPad, 7, 8, 9}).view({2, 3});
  const auto f = train::LabelSmoothingFormula::kUniform;
  auto low = train::label_smoothed_nll(logits, target, 0.1, f, kPad);
  auto high = train::label_smoothed_nll(logits.to(torch::kFloat), target, 0.1, f, kPad);
  EXPECT_EQ(low.loss.scalar_type(), torch::kFloat);
  // The same sums in float (the fused kernel where it applies): float rounding apart, not bf16's.
  EXPECT_NEAR(low.loss.item<float>(), high.loss.item<float>(), 1e-6 * high.loss.item<float>());
  EXPECT_NEAR(low.nll.item<float>(), high.nll.item<float>(), 1e-6 * high.nll.item<float>());
}

TEST(Precision, ModelForwardFollowsItsPrecisionAndGradientsStayFp32) {
  model::Seq2Seq m(test::tiny_config("pre-ln"));
  model::initialize(m, 3);
  m->eval();
  auto src = torch::tensor(std::vector<int64_t>{5, 6, 7, kEos}).view({1, 4});
  auto prev = torch::tensor(std::vector<int64_t>{kEos, 10, 11}).view({1, 3});
  auto fp32 = m->forward(src, prev);
  m->set_precision(model::Precision::kBf16);
  auto bf16 = m->forward(src, prev);
  EXPECT_EQ(fp32.scalar_type(), torch::kFloat);
  EXPECT_EQ(bf16.scalar_type(), torch::kBFloat16);
  const double rel = (bf16.to(torch::kFloat) - fp32).norm().item<double>() / fp32.norm().item<double>();
  EXPECT_GT(rel, 1e-5);  // bf16 really was used
  EXPECT_LT(rel, 3e-2);  // within bf16's rounding over 2 + 2 layers
  bf16.to(torch::kFloat).sum().backward();
  for (const auto& p : m->parameters()) EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
}
