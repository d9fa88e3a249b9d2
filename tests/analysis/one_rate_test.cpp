// The instruments that step every parameter at one lr refuse muP's per-parameter lr in one line
// (model::one_rate_problem): advise, probe --critical-lr, perturb --delta adam; sp passes.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/advise.h"
#include "analysis/perturb.h"
#include "analysis/probe.h"
#include "model/width.h"

namespace normlab::analysis {
namespace {

bool names_one_rate(const std::vector<std::string>& problems, const std::string& what) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
    return p.rfind(what + " measures one lr for every parameter", 0) == 0 && p.find("--parametrisation mup") != std::string::npos;
  });
}

TEST(OneRate, MupIsRefusedBySpAccepted) {
  model::ModelConfig c;
  EXPECT_FALSE(model::one_rate_problem(c, "x").has_value());
  c.parametrisation = model::Parametrisation::kMup;
  EXPECT_TRUE(names_one_rate({*model::one_rate_problem(c, "x")}, "x"));
}

TEST(OneRate, AdviseProbeAndPerturbRefuseMup) {
  AdviseConfig advise;
  ProbeConfig probe;
  probe.critical_lr = true;
  PerturbConfig perturb;
  perturb.delta = DeltaKind::kAdam;
  EXPECT_FALSE(names_one_rate(advise.problems(), "advise"));
  EXPECT_FALSE(names_one_rate(probe.problems(), "--critical-lr"));
  EXPECT_FALSE(names_one_rate(perturb.problems(), "--delta adam"));
  advise.model.parametrisation = probe.model.parametrisation = perturb.model.parametrisation =
      model::Parametrisation::kMup;
  EXPECT_TRUE(names_one_rate(advise.problems(), "advise"));
  EXPECT_TRUE(names_one_rate(probe.problems(), "--critical-lr"));
  EXPECT_TRUE(names_one_rate(perturb.problems(), "--delta adam"));
  perturb.delta = DeltaKind::kSign;  // a sign perturbation has no lr
  EXPECT_FALSE(names_one_rate(perturb.problems(), "--delta adam"));
}

}  // namespace
}  // namespace normlab::analysis
