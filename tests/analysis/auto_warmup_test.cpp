// --warmup auto's rule (analysis/auto_warmup.h) against its closed forms: the geometric ramp
// 2^(n/every) from the stable start, the hold, the catapult's halving, the deadline, the end.
#include "analysis/auto_warmup.h"

#include <cmath>

#include <gtest/gtest.h>

#include "train/schedule.h"

namespace normlab::analysis {
namespace {

constexpr double kNoMeasurement = NAN;

TEST(AutoWarmup, StartsAtTheStableFactorAndDoublesPerInterval) {
  RampState s;
  EXPECT_EQ(ramp_start(s, 0.01, 10), "start");
  EXPECT_DOUBLE_EQ(s.factor, 0.01);
  // Without measurements the factor grows by 2^(1/10) per update: 0.01 x 2^(n/10) after n updates.
  for (int n = 1; n <= 9; ++n) EXPECT_EQ(ramp_after_update(s, 5.0, kNoMeasurement, 10, 1.2, false), "");
  EXPECT_NEAR(s.factor, 0.01 * std::pow(2.0, 0.9), 1e-15);
  // A measurement saying far more is stable: at most a doubling over the next 10 updates.
  EXPECT_EQ(ramp_after_update(s, 5.0, 1e6, 10, 1.2, false), "grow");
  EXPECT_NEAR(s.growth, std::pow(2.0, 0.1), 1e-15);
  // A measurement saying only 1.5x the current factor is stable: grow to it in 10 updates.
  const double f = s.factor;
  EXPECT_EQ(ramp_after_update(s, 5.0, 1.5 * f, 10, 1.2, false), "grow");
  EXPECT_NEAR(s.growth, std::pow(1.5, 0.1), 1e-12);  // (1.5 f / f)^(1/10)
  EXPECT_NEAR(s.factor, f * std::pow(1.5, 0.1), 1e-15);
}

TEST(AutoWarmup, AStableTargetNeedsNoRamp) {
  RampState s;
  EXPECT_EQ(ramp_start(s, 3.0, 10), "done");
  EXPECT_DOUBLE_EQ(s.factor, 1.0);
  EXPECT_EQ(ramp_after_update(s, 100.0, kNoMeasurement, 10, 1.2, false), "");  // nothing after the end
  EXPECT_DOUBLE_EQ(s.factor, 1.0);
}

TEST(AutoWarmup, HoldsWhileTheSharpnessIsAboveTheCurrentRateUntilTheDeadline) {
  RampState s;
  ramp_start(s, 0.1, 4);
  ramp_after_update(s, 5.0, kNoMeasurement, 4, 1.2, false);
  const double f = s.factor;
  EXPECT_EQ(ramp_after_update(s, 5.0, 0.5 * f, 4, 1.2, false), "hold");
  EXPECT_DOUBLE_EQ(s.factor, f);
  EXPECT_EQ(ramp_after_update(s, 5.0, kNoMeasurement, 4, 1.2, false), "");
  EXPECT_DOUBLE_EQ(s.factor, f);  // held between measurements too
  EXPECT_EQ(ramp_after_update(s, 5.0, 0.5 * f, 4, 1.2, true), "deadline");
  EXPECT_NEAR(s.factor, f * std::pow(2.0, 0.25), 1e-15);
}

TEST(AutoWarmup, ACatapultHalvesTheFactorAndStopsItsGrowth) {
  RampState s;
  ramp_start(s, 0.2, 10);
  ramp_after_update(s, 5.0, kNoMeasurement, 10, 1.2, false);  // the running mean starts at 5
  const double f = s.factor;
  EXPECT_EQ(ramp_after_update(s, 5.9, kNoMeasurement, 10, 1.2, false), "");  // 5.9 <= 1.2 x 5
  EXPECT_NEAR(s.loss_mean, 0.9 * 5.0 + 0.1 * 5.9, 1e-15);
  EXPECT_NEAR(s.factor, f * std::pow(2.0, 0.1), 1e-15);
  const double before = s.factor;
  EXPECT_EQ(ramp_after_update(s, 7.0, kNoMeasurement, 10, 1.2, false), "catapult");  // 7 > 1.2 x 5.09
  EXPECT_DOUBLE_EQ(s.factor, before / 2);
  EXPECT_DOUBLE_EQ(s.growth, 1.0);
  EXPECT_EQ(ramp_after_update(s, NAN, kNoMeasurement, 10, 1.2, false), "catapult");  // NaN: a catapult
  EXPECT_DOUBLE_EQ(s.factor, before / 4);
}

TEST(AutoWarmup, EndsAtTheTarget) {
  RampState s;
  ramp_start(s, 0.9, 2);
  EXPECT_EQ(ramp_after_update(s, 5.0, kNoMeasurement, 2, 1.2, false), "done");  // 0.9 x sqrt 2 > 1
  EXPECT_DOUBLE_EQ(s.factor, 1.0);
  EXPECT_TRUE(s.done);
}

// A ramp planned to end at the target ends there, although (1/f)^(1/every) multiplied every
// times lands a rounding error short of 1.
TEST(AutoWarmup, APlannedEndIsReachedDespiteRounding) {
  for (const double f0 : {0.3, 0.7, 0.123456789, 0.9}) {
    RampState s;
    ramp_start(s, f0, 7);
    std::string last;
    for (int n = 1; n <= 70 && !s.done; ++n) last = ramp_after_update(s, 5.0, n % 7 == 0 ? 1e9 : kNoMeasurement, 7, 1.2, false);
    EXPECT_TRUE(s.done) << f0;
    EXPECT_EQ(last, "done") << f0;
    EXPECT_EQ(s.factor, 1.0) << f0;
  }
}

// The doubling time is a share of the run unless given in updates (docs/warmup.md).
TEST(AutoWarmup, MeasuresEveryShareOfThePlannedUpdatesUnlessGivenInUpdates) {
  train::AutoWarmupSettings s;  // every 0, every_ratio 0.05
  EXPECT_EQ(s.updates_between(200), 10);
  EXPECT_EQ(s.updates_between(1000), 50);
  EXPECT_EQ(s.updates_between(30), 2);  // 1.5 rounds up
  EXPECT_EQ(s.updates_between(5), 1);   // never 0
  s.every_ratio = 0.125;
  EXPECT_EQ(s.updates_between(40), 5);
  s.every = 7;
  EXPECT_EQ(s.updates_between(1000), 7);
}

}  // namespace
}  // namespace normlab::analysis
