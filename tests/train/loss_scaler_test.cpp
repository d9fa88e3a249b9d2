// fp16's dynamic loss scaling against fairseq's DynamicLossScaler rules (fairseq/optim/
// dynamic_loss_scaler.py, tolerance 0): sequences worked out by hand from those rules.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "train/loss_scaler.h"

namespace normlab::train {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(LossScaler, GrowsAfterEachWindowOfCleanUpdatesAndHalvesOnOverflow) {
  LossScalerConfig c;  // init 128, factor 2
  DynamicLossScaler s(c, 3);
  // fairseq's update() grows when (iter - last_overflow) % window == 0, last_overflow = -1:
  // iterations 2, 5, 8, ... of an overflow-free run.
  EXPECT_TRUE(s.step(1.0));   // iter 0
  EXPECT_TRUE(s.step(1.0));   // iter 1
  EXPECT_EQ(s.scale(), 128);
  EXPECT_TRUE(s.step(1.0));   // iter 2: (2 + 1) % 3 == 0
  EXPECT_EQ(s.scale(), 256);
  EXPECT_FALSE(s.step(kInf));  // iter 3: overflow, halve, last_overflow = 3
  EXPECT_EQ(s.scale(), 128);
  EXPECT_FALSE(s.step(std::nan("")));  // iter 4: NaN counts as an overflow
  EXPECT_EQ(s.scale(), 64);
  EXPECT_TRUE(s.step(2.0));   // iter 5: (5 - 4) % 3
  EXPECT_TRUE(s.step(2.0));   // iter 6
  EXPECT_EQ(s.scale(), 64);
  EXPECT_TRUE(s.step(2.0));   // iter 7: (7 - 4) % 3 == 0
  EXPECT_EQ(s.scale(), 128);
}

TEST(LossScaler, StopsAtTheMinimumScaleKeepingThePreviousOne) {
  LossScalerConfig c;
  c.init_scale = 4;
  c.min_scale = 1;
  DynamicLossScaler s(c, 100);
  EXPECT_FALSE(s.step(kInf));  // 2
  try {
    s.step(kInf);  // would be 1 <= min: fairseq raises and restores the scale
    FAIL() << "no error at the minimum scale";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--min-loss-scale 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.scale(), 2);
}

TEST(LossScaler, StateRoundTripsExactly) {
  LossScalerConfig c;
  DynamicLossScaler a(c, 3), b(c, 3);
  for (double g : {1.0, kInf, 1.0, 1.0}) a.step(g);
  b.load_state(a.state());
  for (double g : {1.0, 1.0, kInf, 1.0, 1.0, 1.0, 1.0}) {
    EXPECT_EQ(a.step(g), b.step(g));
    EXPECT_EQ(a.scale(), b.scale());
  }
}

}  // namespace
}  // namespace normlab::train
