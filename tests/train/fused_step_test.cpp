// The fused Lion and schedule-free AdamW steps (train/optimizers/fused_step.h) against the ATen
// operations they replace, written out here tensor by tensor in lion-pytorch's and schedulefree's
// order: equal to the bit in float32 and float64, whatever the length (vector tails), the
// thread count, the decay and the side of 0.5 the average's weight is on. lion-pytorch and
// schedulefree themselves are compared in tests/train/optimizer_reference.py.
#include <gtest/gtest.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "train/optimizers/fused_step.h"

namespace fused = normlab::train::fused;

namespace {

const int64_t kLengths[] = {1, 5, 16, 17, 31, 33, 1000, 70001, (1 << 17) + 3};

// A gradient and a moment with exact zeros at a few places (sign(0) = 0 in Lion's update).
std::pair<torch::Tensor, torch::Tensor> gradient_and_moment(int64_t n, torch::ScalarType dtype) {
  auto g = torch::randn({n}, dtype), m = 0.1 * torch::randn({n}, dtype);
  for (int64_t i = 0; i < n; i += 7) g[i] = 0.0, m[i] = 0.0;
  return {g, m};
}

// lion-pytorch's update_fn on one tensor: p *= 1 - lr wd; p -= lr sign(b1 m + (1 - b1) g);
// m = b2 m + (1 - b2) g.
void lion_reference(torch::Tensor p, const torch::Tensor& g, torch::Tensor m, const fused::LionStep& s) {
  if (s.weight_decay != 0.0) p.mul_(1.0 - s.lr * s.weight_decay);
  auto c = m.mul(s.beta1).add_(g, 1.0 - s.beta1).sign_();
  p.add_(c, -s.lr);
  m.mul_(s.beta2).add_(g, 1.0 - s.beta2);
}

// schedulefree's AdamWScheduleFree step on one tensor (its foreach path's calls, one by one).
void schedule_free_reference(torch::Tensor y, const torch::Tensor& g, torch::Tensor z, torch::Tensor v,
                             const fused::ScheduleFreeStep& s) {
  v.mul_(s.beta2).addcmul_(g, g, 1.0 - s.beta2);
  auto d = g.div(v.div(s.bias_correction2).sqrt_().add_(s.eps));
  if (s.weight_decay != 0.0) d.add_(y, s.weight_decay);
  y.lerp_(z, s.c).add_(d, s.lr * (s.beta1 * (1.0 - s.c) - 1.0));
  z.sub_(d, s.lr);
}

::testing::AssertionResult same_bits(const torch::Tensor& got, const torch::Tensor& want) {
  if (torch::equal(got, want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << (got != want).sum().item<int64_t>() << " of " << got.numel()
                                       << " elements differ, worst by " << (got - want).abs().max().item<double>();
}

class FusedStep : public ::testing::TestWithParam<int> {  // the thread count
 protected:
  void SetUp() override {
    threads_ = at::get_num_threads();
    at::set_num_threads(GetParam());
    if (!fused::applies({torch::zeros({1})})) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  }
  void TearDown() override { at::set_num_threads(threads_); }

 private:
  int threads_ = 1;
};

}  // namespace

TEST_P(FusedStep, LionIsTheUnfusedStepBitForBit) {
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    for (int64_t n : kLengths) {
      for (double wd : {0.0, 0.5}) {
        torch::manual_seed(n);
        auto p = torch::randn({n}, dtype);
        auto [g, m] = gradient_and_moment(n, dtype);
        auto p_want = p.clone(), m_want = m.clone();
        const fused::LionStep s{3e-3, wd, 0.9, 0.99};
        for (int step = 0; step < 3; ++step) {  // m nonzero from the second step on
          fused::lion(p, g, m, s);
          lion_reference(p_want, g, m_want, s);
        }
        SCOPED_TRACE(std::string(c10::toString(dtype)) + " n=" + std::to_string(n) + " wd=" + std::to_string(wd));
        EXPECT_TRUE(same_bits(p, p_want));
        EXPECT_TRUE(same_bits(m, m_want));
      }
    }
  }
}

TEST_P(FusedStep, ScheduleFreeIsTheUnfusedStepBitForBit) {
  if (!fused::schedule_free_applies({torch::zeros({1})})) GTEST_SKIP() << "torch.sqrt's square root is not known here";
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    for (int64_t n : kLengths) {
      for (double wd : {0.0, 0.01}) {
        torch::manual_seed(n);
        auto y = torch::randn({n}, dtype), z = y + 0.01 * torch::randn({n}, dtype);
        auto [g, v] = gradient_and_moment(n, dtype);
        v = v.square();
        auto y_want = y.clone(), z_want = z.clone(), v_want = v.clone();
        for (double c : {1.0, 0.5, 0.3, 0.1}) {  // lerp's two formulas: |c| < 0.5 and not
          const fused::ScheduleFreeStep s{2.5e-3, 0.9, 0.999, 1e-8, wd, c, 1.0 - std::pow(0.999, 1.0 / c)};
          fused::schedule_free(y, g, z, v, s);
          schedule_free_reference(y_want, g, z_want, v_want, s);
        }
        SCOPED_TRACE(std::string(c10::toString(dtype)) + " n=" + std::to_string(n) + " wd=" + std::to_string(wd));
        EXPECT_TRUE(same_bits(y, y_want));
        EXPECT_TRUE(same_bits(z, z_want));
        EXPECT_TRUE(same_bits(v, v_want));
      }
    }
  }
}

TEST(FusedStepScope, TakesContiguousFloatCpuTensorsOfOneDtypeOnly) {
  if (!fused::applies({torch::zeros({4})})) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  EXPECT_TRUE(fused::applies({torch::zeros({4}), torch::zeros({2, 2}, torch::kFloat32)}));
  EXPECT_TRUE(fused::applies({torch::zeros({4}, torch::kFloat64)}));
  EXPECT_FALSE(fused::applies({torch::zeros({4}), torch::zeros({4}, torch::kFloat64)}));
  EXPECT_FALSE(fused::applies({torch::zeros({4}, torch::kBFloat16)}));
  EXPECT_FALSE(fused::applies({torch::zeros({4, 4}).t()}));
  EXPECT_FALSE(fused::applies({}));
  auto p = torch::zeros({4}, torch::kBFloat16);
  EXPECT_THROW(fused::lion(p, p, p, {1e-3, 0.0, 0.9, 0.99}), c10::Error);
}

INSTANTIATE_TEST_SUITE_P(Threads, FusedStep, ::testing::Values(1, 2));
