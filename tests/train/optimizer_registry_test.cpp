// The optimiser registry (train/optimizer_algorithm.h): a new optimiser plugs in by one
// registration alone, here a test-only sign descent without state or threshold, checked against
// its closed form; curvature refuses it in one line. The built-in ones' answers for curvature
// against the thresholds' closed forms (Cohen et al. 2021, 2022; REFERENCE §9).
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "../analysis/tiny_hessian.h"
#include "analysis/curvature.h"
#include "train/optimizer_algorithm.h"

namespace normlab {
namespace {

// Sign descent, p -= lr sign(g) (signSGD, Bernstein et al. 2018): no state, and no known
// stability threshold or preconditioner.
class SignSgd final : public train::OptimizerAlgorithm {
 public:
  using OptimizerAlgorithm::OptimizerAlgorithm;
  std::optional<double> stability_threshold(double) const override { return std::nullopt; }

 protected:
  void update(const torch::Tensor& p, const torch::Tensor& grad, size_t, double lr) override {
    p.sub_(grad.sign(), lr);
  }
};

// Registered once per process (the test binary holds every test).
train::OptimizerKind sign_sgd() {
  static const auto kind = train::register_optimizer(
      {"sign-sgd",
       [](const train::OptimizerConfig& c, size_t) -> std::unique_ptr<train::OptimizerAlgorithm> {
         return std::make_unique<SignSgd>(c);
       },
       train::kNoOptions});
  return kind;
}

train::OptimizerConfig sign_sgd_config() {
  train::OptimizerConfig c;
  c.kind = sign_sgd();
  return c;
}

TEST(OptimizerRegistry, ANewOptimiserIsKnownByItsName) {
  const auto kind = sign_sgd();
  EXPECT_EQ(train::parse_optimizer_kind("sign-sgd"), kind);
  EXPECT_EQ(train::to_string(kind), "sign-sgd");
  EXPECT_EQ(train::optimizer_choices(), "sgd|adam|adamw|radam|lion|muon|adamw-schedulefree|sign-sgd");
  try {
    train::parse_optimizer_kind("lamb");
    ADD_FAILURE() << "accepted lamb";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected sgd|adam|adamw|radam|lion|muon|adamw-schedulefree|sign-sgd"), std::string::npos) << e.what();
  }
  const nlohmann::json j = sign_sgd_config();
  EXPECT_EQ(j.at("optimizer"), "sign-sgd");
  EXPECT_EQ(j.get<train::OptimizerConfig>().kind, kind);
  EXPECT_THROW(train::register_optimizer({"sign-sgd", nullptr, train::kNoOptions}), std::invalid_argument);
  EXPECT_THROW(train::register_optimizer({"adamw", nullptr, train::kNoOptions}), std::invalid_argument);
}

TEST(OptimizerRegistry, ANewOptimiserStepsThroughTheFacade) {
  // Dyadic values: p_k = p_0 - lr s sum_j sign(g_j) exactly, s the lr scale.
  auto w = torch::tensor({1.0, -2.0, 0.5}, torch::kFloat64);
  auto b = torch::tensor({0.0, 3.0}, torch::kFloat64);
  train::Optimizer opt({{"w", w}, {"b", b}}, sign_sgd_config());
  opt.set_lr_scales({1.0, 0.5});
  const double lr = 0.25;
  const std::vector<std::vector<double>> gw = {{0.3, -7.0, 0.0}, {2.0, -1e-9, -4.0}, {-1.0, 5.0, 6.0}};
  const std::vector<std::vector<double>> gb = {{-1.0, 1.0}, {-2.0, 0.0}, {3.0, 9.0}};
  for (size_t k = 0; k < gw.size(); ++k) {
    w.mutable_grad() = torch::tensor(gw[k], torch::kFloat64);
    b.mutable_grad() = torch::tensor(gb[k], torch::kFloat64);
    opt.step(lr, /*record_updates=*/true);
  }
  // Signs summed over the steps (sign(0) = 0): w (1, -1, 0) + (1, -1, -1) + (-1, 1, 1) = (1, -1, 0);
  // b (-1, 1) + (-1, 0) + (1, 1) = (-1, 2).
  EXPECT_TRUE(torch::equal(w, torch::tensor({1.0 - lr, -2.0 + lr, 0.5}, torch::kFloat64))) << w;
  EXPECT_TRUE(torch::equal(b, torch::tensor({0.5 * lr, 3.0 - 2 * 0.5 * lr}, torch::kFloat64))) << b;
  EXPECT_TRUE(torch::equal(opt.last_updates().at("b"), torch::tensor({-0.5 * lr, -0.5 * lr}, torch::kFloat64)));
  EXPECT_EQ(opt.steps(), 3);
  EXPECT_FALSE(opt.algorithm().preconditioned());

  // No per-parameter state: "steps" alone, which loads; an AdamW state is refused by name.
  const auto state = opt.state();
  ASSERT_EQ(state.size(), 1u);
  train::Optimizer resumed({{"w", w.clone()}, {"b", b.clone()}}, sign_sgd_config());
  resumed.load_state(state);
  EXPECT_EQ(resumed.steps(), 3);
  train::Optimizer adamw({{"w", w.clone()}, {"b", b.clone()}}, train::OptimizerConfig{});
  for (const auto& [name, p] : adamw.parameters()) p.mutable_grad() = torch::ones_like(p);
  adamw.step(0.1);
  try {
    resumed.load_state(adamw.state());
    ADD_FAILURE() << "accepted AdamW's state";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("another optimiser than --optimizer sign-sgd"), std::string::npos)
        << e.what();
  }
}

TEST(OptimizerRegistry, OptionsANewOptimiserDoesNotReadAreRefused) {
  auto c = sign_sgd_config();
  EXPECT_TRUE(c.problems().empty());
  c.momentum = 0.9;
  c.adam_init_v = train::AdamInitV::kGradSquared;
  const auto p = c.problems();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].rfind("--momentum and --nesterov apply to --optimizer sgd only, not sign-sgd", 0), 0u) << p[0];
  EXPECT_EQ(p[1], "--adam-init-v applies to --optimizer adam|adamw|radam only, not sign-sgd");
}

TEST(OptimizerRegistry, CurvatureRefusesAnOptimiserWithoutThreshold) {
  const auto c = sign_sgd_config();
  const auto problem = analysis::curvature_problem(c);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("--optimizer sign-sgd"), std::string::npos) << *problem;
  EXPECT_EQ(problem->find('\n'), std::string::npos) << "one line";
  const auto refuses = [&](const std::function<void()>& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << " accepted sign-sgd";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), *problem) << what;
    }
  };
  refuses([&] { analysis::stability_threshold(c, 1e-3); }, "stability_threshold");
  refuses([&] { analysis::stability_threshold(c, 0.0); }, "stability_threshold at lr 0");
  refuses([&] { analysis::preconditioned(c); }, "preconditioned");
  refuses(
      [&] {
        analysis::CurvatureSeries(train::CurvatureConfig{}, c, analysis::tiny_model(), analysis::tiny_batches(3),
                                  train::LossOptions{}, torch::kCPU, "unused.jsonl", 0, /*writes=*/false,
                                  core::ProcessGroup());
      },
      "CurvatureSeries");
}

TEST(OptimizerRegistry, BuiltInOptimisersAnswerForCurvature) {
  for (const auto kind : {train::OptimizerKind::kSgd, train::OptimizerKind::kAdam, train::OptimizerKind::kAdamW,
                          train::OptimizerKind::kRAdam}) {
    train::OptimizerConfig c;
    c.kind = kind;
    EXPECT_FALSE(analysis::curvature_problem(c).has_value()) << to_string(kind);
    EXPECT_EQ(analysis::preconditioned(c), kind != train::OptimizerKind::kSgd) << to_string(kind);
  }
  train::OptimizerConfig sgd;
  sgd.kind = train::OptimizerKind::kSgd;
  sgd.momentum = 0.5;
  EXPECT_DOUBLE_EQ(analysis::stability_threshold(sgd, 0.1), 3.0 / 0.1);  // (2 + 2 mu)/lr
  train::OptimizerConfig radam;
  radam.kind = train::OptimizerKind::kRAdam;
  radam.betas = {0.8, 0.99};
  EXPECT_NEAR(analysis::stability_threshold(radam, 0.5), 36.0, 1e-12);  // (2 + 2 b1)/((1 - b1) lr) = 3.6/0.1
}

// Lion and Muon declare no threshold (docs/optimisers.md: none known for either, and Muon's
// mixture with AdamW has no single one): curvature refuses each in one line naming it.
TEST(OptimizerRegistry, CurvatureRefusesLionAndMuon) {
  for (const auto kind : {train::OptimizerKind::kLion, train::OptimizerKind::kMuon}) {
    train::OptimizerConfig c;
    c.kind = kind;
    const auto problem = analysis::curvature_problem(c);
    ASSERT_TRUE(problem.has_value());
    EXPECT_EQ(*problem, "--optimizer " + train::to_string(kind) +
                            ": curvature needs its stability threshold and it declares none (docs/optimisers.md)");
    EXPECT_THROW(analysis::stability_threshold(c, 1e-3), std::invalid_argument);
    EXPECT_THROW(analysis::preconditioned(c), std::invalid_argument);
  }
}

}  // namespace
}  // namespace normlab
