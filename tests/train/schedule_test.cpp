// Learning-rate schedules against values computed by hand from their formulas
// (docs/optimisers.md; wsd's 1 - sqrt(x) with Python's math). `update` is 1-based; n = update - 1
// is fairseq's num_updates.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "train/schedule.h"

using namespace normlab::train;

namespace {

ScheduleConfig make(ScheduleKind kind, double lr, int64_t warmup, int64_t max_steps = 0, int64_t wsd_decay_steps = 0) {
  ScheduleConfig c;
  c.kind = kind;
  c.lr = lr;
  c.warmup_steps = warmup;
  c.max_steps = max_steps;
  c.wsd_decay_steps = wsd_decay_steps;
  EXPECT_TRUE(c.problems().empty()) << c.problems().front();
  return c;
}

double rate(const ScheduleConfig& c, int64_t update, int64_t epoch = 1) {
  return learning_rate(c, update, epoch);
}

bool contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Schedule, InverseSqrtFairseqWarmup4000) {
  auto c = make(ScheduleKind::kInverseSqrt, 5e-4, 4000);
  c.warmup_init_lr = 1e-7;
  // fairseq: step_update(0) before the first update, so update 1 runs at warmup_init_lr.
  EXPECT_DOUBLE_EQ(rate(c, 1), 1e-7);
  // n = 1: 1e-7 + (5e-4 - 1e-7) / 4000 = 1e-7 + 1.24975e-7.
  EXPECT_NEAR(rate(c, 2), 2.24975e-7, 1e-20);
  // n = 3999: 1e-7 + 3999 * 4.999e-4 / 4000 = 1e-7 + 4.99775025e-4.
  EXPECT_NEAR(rate(c, 4000), 4.99875025e-4, 1e-17);
  // n = 4000: the peak; n = 16000: 5e-4 * sqrt(4000 / 16000) = 2.5e-4.
  EXPECT_NEAR(rate(c, 4001), 5e-4, 1e-18);
  EXPECT_NEAR(rate(c, 16001), 2.5e-4, 1e-18);
  // n = 1e6: 5e-4 * sqrt(4000 / 1e6) = 5e-4 * 0.063245553203367586.
  EXPECT_NEAR(rate(c, 1000001), 3.1622776601683794e-5, 1e-18);
}

TEST(Schedule, InverseSqrtDefaultInitIsZero) {
  auto c = make(ScheduleKind::kInverseSqrt, 1e-3, 10);
  EXPECT_EQ(rate(c, 1), 0.0);
  EXPECT_NEAR(rate(c, 6), 5e-4, 1e-18);  // n = 5 of 10
}

TEST(Schedule, InverseSqrtWithoutWarmupIsFinite) {
  // W = 1 (fairseq): update 1 at warmup_init_lr, then lr / sqrt(n).
  auto one = make(ScheduleKind::kInverseSqrt, 1e-3, 1);
  one.warmup_init_lr = 1e-7;
  EXPECT_EQ(rate(one, 1), 1e-7);
  EXPECT_NEAR(rate(one, 2), 1e-3, 1e-18);
  EXPECT_NEAR(rate(one, 5), 5e-4, 1e-18);
  // W = 0: no warm-up update at all; lr for n = 0 and 1, then lr / sqrt(n).
  auto zero = make(ScheduleKind::kInverseSqrt, 1e-3, 0);
  EXPECT_EQ(rate(zero, 1), 1e-3);
  EXPECT_NEAR(rate(zero, 2), 1e-3, 1e-18);
  EXPECT_NEAR(rate(zero, 5), 5e-4, 1e-18);
  EXPECT_NEAR(rate(zero, 101), 1e-4, 1e-18);
  for (int64_t u : {1, 2, 3, 1000})
    for (const auto* c : {&one, &zero}) EXPECT_TRUE(std::isfinite(rate(*c, u)));
}

TEST(Schedule, Constant) {
  auto c = make(ScheduleKind::kConstant, 5e-4, 0);
  EXPECT_EQ(rate(c, 1), 5e-4);
  EXPECT_EQ(rate(c, 123456, 40), 5e-4);
  auto w = make(ScheduleKind::kConstant, 1e-3, 10);
  EXPECT_EQ(rate(w, 1), 0.0);
  EXPECT_NEAR(rate(w, 6), 5e-4, 1e-18);
  EXPECT_EQ(rate(w, 11), 1e-3);
}

TEST(Schedule, LinearWarmupThenDecay) {
  auto c = make(ScheduleKind::kLinear, 1e-3, 10, 110);
  EXPECT_EQ(rate(c, 1), 0.0);
  EXPECT_NEAR(rate(c, 11), 1e-3, 1e-18);    // n = 10: the peak
  EXPECT_NEAR(rate(c, 61), 5e-4, 1e-18);    // n = 60: half way down 100 updates
  EXPECT_NEAR(rate(c, 110), 1e-5, 1e-18);   // n = 109: the last of max_steps updates
  EXPECT_NEAR(rate(c, 111), 0.0, 1e-18);    // n = 110 and beyond: min_lr
  EXPECT_NEAR(rate(c, 5000), 0.0, 1e-18);
  c.min_lr = 1e-4;
  EXPECT_NEAR(rate(c, 61), 1e-4 + 0.5 * 9e-4, 1e-18);
  EXPECT_NEAR(rate(c, 5000), 1e-4, 1e-18);
}

TEST(Schedule, StepDecayXiongEpoch8) {
  // Xiong 2020: 5e-4, multiplied by 0.1 at epoch 8, no warm-up.
  auto c = make(ScheduleKind::kStepDecay, 5e-4, 0);
  c.lr_decay_epochs = 8;
  c.lr_decay_factor = 0.1;
  for (int64_t e = 1; e <= 7; ++e) EXPECT_EQ(rate(c, 1 + 1000 * e, e), 5e-4) << e;
  EXPECT_NEAR(rate(c, 9000, 8), 5e-5, 1e-19);
  EXPECT_NEAR(rate(c, 9000, 15), 5e-5, 1e-19);
  EXPECT_NEAR(rate(c, 9000, 16), 5e-6, 1e-20);  // periodic: again at 2K
  c.lr_decay_count = 1;                        // Xiong's single decay
  EXPECT_NEAR(rate(c, 9000, 16), 5e-5, 1e-19);
  EXPECT_NEAR(rate(c, 9000, 100), 5e-5, 1e-19);
  EXPECT_EQ(rate(c, 9000, 7), 5e-4);
}

TEST(Schedule, TFixupNoWarmupDecay) {
  auto c = make(ScheduleKind::kTFixup, 5e-4, 0);
  EXPECT_EQ(rate(c, 1), 5e-4);                                   // n = 0
  EXPECT_NEAR(rate(c, 4001), 5e-4 / std::sqrt(2.0), 1e-18);     // n = P
  EXPECT_NEAR(rate(c, 12001), 2.5e-4, 1e-18);                   // n = 3P
  c.tfixup_decay_steps = 100;
  EXPECT_NEAR(rate(c, 301), 2.5e-4, 1e-18);
}

TEST(Schedule, Cosine) {
  auto c = make(ScheduleKind::kCosine, 1e-3, 0, 100);
  EXPECT_NEAR(rate(c, 1), 1e-3, 1e-18);
  // n = 25: 1e-3 * (1 + cos(pi/4)) / 2 = 1e-3 * 0.85355339059327373.
  EXPECT_NEAR(rate(c, 26), 8.5355339059327373e-4, 1e-18);
  EXPECT_NEAR(rate(c, 51), 5e-4, 1e-18);
  EXPECT_NEAR(rate(c, 101), 0.0, 1e-18);
  EXPECT_NEAR(rate(c, 1000), 0.0, 1e-18);
  c.min_lr = 1e-4;
  EXPECT_NEAR(rate(c, 51), 5.5e-4, 1e-18);
  auto w = make(ScheduleKind::kCosine, 1e-3, 10, 110);
  EXPECT_NEAR(rate(w, 6), 5e-4, 1e-18);   // warm-up
  EXPECT_NEAR(rate(w, 61), 5e-4, 1e-18);  // half way through the cosine
}

// Warm-up, stable, decay (Hägele et al. 2024, their wsd_schedule with n_hold = M - D):
// W = 10, M = 110, D = 20, so updates n = 90..109 cool down with x = (n - 90) / 20. Values of
// 1 - sqrt(x) from Python's math: x = 0.25: 0.5; 0.5: 0.2928932188134524; 0.95: 0.025320565519103666.
TEST(Schedule, WsdWarmupStableThenCoolDown) {
  auto c = make(ScheduleKind::kWsd, 1e-3, 10, 110, 20);
  EXPECT_EQ(c.wsd_decay, WsdDecay::kOneMinusSqrt);  // the default shape, Hägele et al.'s best
  EXPECT_EQ(rate(c, 1), 0.0);                       // n = 0: warmup_init_lr
  EXPECT_NEAR(rate(c, 10), 9e-4, 1e-18);            // n = 9, the last warm-up update
  EXPECT_EQ(rate(c, 11), 1e-3);                     // n = 10: stable
  EXPECT_EQ(rate(c, 90), 1e-3);                     // n = 89: the last stable update
  EXPECT_EQ(rate(c, 91), 1e-3);                     // n = 90: the first cool-down update, x = 0
  EXPECT_NEAR(rate(c, 96), 5e-4, 1e-18);            // n = 95: x = 0.25
  EXPECT_NEAR(rate(c, 101), 2.9289321881345245e-4, 1e-18);   // n = 100: the middle, x = 0.5
  EXPECT_NEAR(rate(c, 110), 2.5320565519103668e-5, 1e-18);   // n = 109, update M: x = 0.95
  EXPECT_EQ(rate(c, 111), 0.0);                     // n = M and beyond: min_lr
  EXPECT_EQ(rate(c, 5000), 0.0);
  c.min_lr = 1e-4;
  EXPECT_NEAR(rate(c, 96), 5.5e-4, 1e-18);
  EXPECT_NEAR(rate(c, 110), 1.227885089671933e-4, 1e-18);    // 1e-4 + 9e-4 (1 - sqrt(0.95))
  EXPECT_EQ(rate(c, 111), 1e-4);

  c.min_lr = 0.0;
  c.wsd_decay = WsdDecay::kLinear;
  EXPECT_EQ(rate(c, 91), 1e-3);
  EXPECT_NEAR(rate(c, 96), 7.5e-4, 1e-18);
  EXPECT_NEAR(rate(c, 101), 5e-4, 1e-18);
  EXPECT_NEAR(rate(c, 110), 5e-5, 1e-18);  // lr / D, as linear's last update
  EXPECT_EQ(rate(c, 111), 0.0);

  // D = M - W: no stable phase; the cool-down starts right after the warm-up. W = 0: at update 1.
  auto all = make(ScheduleKind::kWsd, 1e-3, 0, 20, 20);
  EXPECT_EQ(rate(all, 1), 1e-3);
  EXPECT_NEAR(rate(all, 2), 7.763932022500211e-4, 1e-18);  // x = 1/20 (Python: 1e-3 (1 - sqrt(0.05)))
  EXPECT_NEAR(rate(all, 6), 5e-4, 1e-18);
}

TEST(Schedule, WsdRefusesWhatCannotBeScheduled) {
  auto problems_of = [](int64_t warmup, int64_t max_steps, int64_t decay) {
    ScheduleConfig c;
    c.kind = ScheduleKind::kWsd;
    c.warmup_steps = warmup;
    c.max_steps = max_steps;
    c.wsd_decay_steps = decay;
    return c.problems();
  };
  EXPECT_TRUE(problems_of(10, 110, 100).empty());  // D = M - W: allowed
  auto p = problems_of(4000, 0, 200);               // --max-epochs alone
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].rfind("--lr-schedule wsd needs --max-steps", 0), 0u) << p[0];
  p = problems_of(100, 1000, 0);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "--lr-schedule wsd needs --wsd-decay-steps >= 1, the cool-down's updates, got 0 "
                  "(Hägele et al. 2024: 20% of --max-steps, here 200)");
  p = problems_of(200, 1000, 900);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "--wsd-decay-steps 900 exceeds --max-steps 1000 minus --warmup-steps 200 (800): "
                  "the cool-down would begin inside the warm-up");
  p = problems_of(10, 110, -5);  // the option's own range
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].rfind("--wsd-decay-steps must be >= 0", 0), 0u) << p[0];
  p = problems_of(10, 0, 0);  // both at once, each on its line
  EXPECT_EQ(p.size(), 2u);
  for (const auto& line : p) EXPECT_EQ(line.find('\n'), std::string::npos) << line;

  // Its options under another schedule.
  ScheduleConfig other;
  other.wsd_decay_steps = 100;
  ASSERT_EQ(other.problems().size(), 1u);
  EXPECT_EQ(other.problems()[0], "--wsd-decay-steps and --wsd-decay apply to --lr-schedule wsd only, not inverse-sqrt");
  other.wsd_decay_steps = 0;
  other.wsd_decay = WsdDecay::kLinear;
  EXPECT_EQ(other.problems().size(), 1u);
}

TEST(Schedule, UpdateAndEpochAreOneBased) {
  ScheduleConfig c;
  EXPECT_THROW(learning_rate(c, 0, 1), std::invalid_argument);
  EXPECT_THROW(learning_rate(c, 1, 0), std::invalid_argument);
}

TEST(Schedule, NamesRoundTrip) {
  for (const auto& name : schedule_kind_names())
    EXPECT_EQ(to_string(parse_schedule_kind(name)), name);
  EXPECT_EQ(schedule_kind_names().size(), 7u);
  EXPECT_EQ(parse_wsd_decay("1-sqrt"), WsdDecay::kOneMinusSqrt);
  EXPECT_EQ(to_string(WsdDecay::kLinear), "linear");
  EXPECT_THROW(parse_wsd_decay("sqrt"), std::invalid_argument);
  try {
    parse_schedule_kind("inverse_sqrt");
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--lr-schedule"), std::string::npos) << m;
    EXPECT_NE(m.find("'inverse_sqrt'"), std::string::npos) << m;
    EXPECT_NE(m.find("constant|inverse-sqrt|linear|step-decay|t-fixup|cosine|wsd"), std::string::npos);
  }
}

TEST(Schedule, ProblemsListsEveryBadValue) {
  ScheduleConfig c;
  EXPECT_TRUE(c.problems().empty());
  c.kind = ScheduleKind::kLinear;  // needs max_steps > warmup_steps
  c.lr = -1.0;
  c.warmup_steps = -5;
  c.warmup_init_lr = -1e-7;
  c.min_lr = -1.0;
  c.max_steps = -10;
  c.lr_decay_epochs = 0;
  c.lr_decay_factor = 1.5;
  c.lr_decay_count = -1;
  c.tfixup_decay_steps = 0;
  const auto p = c.problems();
  for (const char* option : {"--lr must", "--warmup-steps", "--warmup-init-lr", "--min-lr",
                             "--max-steps must", "--lr-decay-epochs", "--lr-decay-factor",
                             "--lr-decay-count", "--tfixup-decay-steps", "--lr-schedule linear"})
    EXPECT_TRUE(contains(p, option)) << option;
  EXPECT_EQ(p.size(), 10u);
  EXPECT_THROW(c.validate(), std::invalid_argument);

  ScheduleConfig t;
  t.kind = ScheduleKind::kTFixup;  // default warm-up 4000 contradicts T-Fixup
  ASSERT_EQ(t.problems().size(), 1u);
  EXPECT_NE(t.problems()[0].find("--warmup-steps 0"), std::string::npos);
  ScheduleConfig nan;
  nan.lr = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(contains(nan.problems(), "--lr must be positive"));
}

TEST(Schedule, JsonRoundTrip) {
  ScheduleConfig c;
  c.kind = ScheduleKind::kStepDecay;
  c.lr = 7e-4;
  c.warmup_steps = 0;
  c.lr_decay_epochs = 6;
  c.lr_decay_count = 1;
  const nlohmann::json j = c;
  EXPECT_EQ(j.at("lr_schedule"), "step-decay");
  const auto back = j.get<ScheduleConfig>();
  EXPECT_EQ(nlohmann::json(back), j);

  ScheduleConfig w;
  w.kind = ScheduleKind::kWsd;
  w.max_steps = 1000;
  w.wsd_decay_steps = 200;
  w.wsd_decay = WsdDecay::kLinear;
  const nlohmann::json jw = w;
  EXPECT_EQ(jw.at("wsd_decay"), "linear");
  EXPECT_EQ(jw.at("wsd_decay_steps"), 200);
  EXPECT_EQ(nlohmann::json(jw.get<ScheduleConfig>()), jw);
  // A config.json from before wsd has neither key: their defaults.
  auto old = j;
  old.erase("wsd_decay");
  old.erase("wsd_decay_steps");
  EXPECT_EQ(nlohmann::json(old.get<ScheduleConfig>()), j);
}
