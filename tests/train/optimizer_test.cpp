// Optimisers: RAdam against hand-computed steps (REFERENCE §1), exact resume through a state
// file, recorded updates, clip_grad_norm against hand values, configuration problems, muon's
// split of real models' parameters and its orthogonalised step, CUDA. The comparison with
// torch.optim on the same gradients is optimizer_reference.py.
#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "../model/tiny_model.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "train/optimizer.h"
#include "train/optimizers/muon.h"

using namespace normlab;
using train::OptimizerConfig;
using train::OptimizerKind;
using train::RAdamFallback;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("normlab_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

torch::Tensor scalar_param(double v) {
  return torch::full({1}, v, torch::kFloat64).set_requires_grad(true);
}

OptimizerConfig radam(RAdamFallback fallback, double wd = 0.0) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kRAdam;
  c.radam_fallback = fallback;
  c.weight_decay = wd;
  return c;  // betas 0.9, 0.98, eps 1e-8 by default
}

// Runs `grads` through a one-element parameter starting at 1.0; returns the value after each step.
std::vector<double> run_scalar(const OptimizerConfig& c, const std::vector<double>& grads,
                               double lr) {
  auto p = scalar_param(1.0);
  train::Optimizer opt({{"p", p}}, c);
  std::vector<double> out;
  for (double g : grads) {
    p.mutable_grad() = torch::full({1}, g, torch::kFloat64);
    opt.step(lr);
    out.push_back(p.item<double>());
  }
  return out;
}

// rho_t and the rectification r_t of REFERENCE §1 for beta2 = 0.98, computed with Python's
// math module from rho_inf = 2/(1-beta2) - 1, rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t),
// r_t = sqrt((rho_t-4)(rho_t-2) rho_inf / ((rho_inf-4)(rho_inf-2) rho_t)):
// rho_1..7 = 1, 1.98990, 2.97306, 3.94950, 4.91920 (< 5: not rectified), 5.88218, 6.83843.
constexpr double kR6 = 0.11552321163629194;
constexpr double kR7 = 0.14688699445293213;

// With a constant gradient g, m_t = (1 - b1^t) g and v_t = (1 - b2^t) g^2, so RAdam's step
// lr r_t sqrt(1-b2^t)/(1-b1^t) * m_t / (sqrt(v_t) + eps) is lr r_t a / (a + eps),
// a = sqrt(1 - b2^t) |g|.
double rectified_step(double lr, double r, int t, double g) {
  const double a = std::sqrt(1.0 - std::pow(0.98, t)) * g;
  return lr * r * a / (a + 1e-8);
}

TEST(RAdam, SkipsTheFirstFiveStepsThenRectifies) {
  const double lr = 0.1, g = 0.5;
  const auto p = run_scalar(radam(RAdamFallback::kSkip), std::vector<double>(7, g), lr);
  for (int t = 1; t <= 5; ++t) EXPECT_EQ(p[t - 1], 1.0) << "step " << t;
  const double p6 = 1.0 - rectified_step(lr, kR6, 6, g);
  EXPECT_NEAR(p[5], p6, 1e-15);
  EXPECT_NEAR(p[6], p6 - rectified_step(lr, kR7, 7, g), 1e-15);
}

TEST(RAdam, SgdFallbackMovesByLrTimesGradient) {
  // p -= lr / (1 - b1^t) * m_t = lr g for a constant gradient.
  const double lr = 0.1, g = 0.5;
  const auto p = run_scalar(radam(RAdamFallback::kSgd), std::vector<double>(7, g), lr);
  for (int t = 1; t <= 5; ++t) EXPECT_NEAR(p[t - 1], 1.0 - t * lr * g, 1e-15) << "step " << t;
  const double p6 = 0.75 - rectified_step(lr, kR6, 6, g);
  EXPECT_NEAR(p[5], p6, 1e-15);
  EXPECT_NEAR(p[6], p6 - rectified_step(lr, kR7, 7, g), 1e-15);
}

TEST(RAdam, DecoupledWeightDecayOnlyWithAnUpdate) {
  // Authors' code: p -= lr wd p before each applied update; skipped steps decay nothing.
  const double lr = 0.1, g = 0.5, wd = 0.1;
  const auto skip = run_scalar(radam(RAdamFallback::kSkip, wd), std::vector<double>(6, g), lr);
  for (int t = 1; t <= 5; ++t) EXPECT_EQ(skip[t - 1], 1.0);
  EXPECT_NEAR(skip[5], 1.0 * (1.0 - lr * wd) - rectified_step(lr, kR6, 6, g), 1e-15);
  const auto sgd = run_scalar(radam(RAdamFallback::kSgd, wd), std::vector<double>(2, g), lr);
  EXPECT_NEAR(sgd[0], 0.99 - 0.05, 1e-15);
  EXPECT_NEAR(sgd[1], (0.99 - 0.05) * 0.99 - 0.05, 1e-15);
}

TEST(RAdam, VaryingGradientsMatchTheFormulaStepByStep) {
  // The recursion of REFERENCE §1 written out on doubles.
  const std::vector<double> grads{0.3, -1.2, 0.7, 2.0, -0.4, 0.9, 1.5, -0.2};
  const double lr = 0.05, wd = 0.02, b1 = 0.9, b2 = 0.98, eps = 1e-8;
  for (auto fallback : {RAdamFallback::kSkip, RAdamFallback::kSgd}) {
    const auto got = run_scalar(radam(fallback, wd), grads, lr);
    double p = 1.0, m = 0.0, v = 0.0;
    const double rho_inf = 2.0 / (1.0 - b2) - 1.0;
    for (size_t i = 0; i < grads.size(); ++i) {
      const int t = static_cast<int>(i) + 1;
      m = b1 * m + (1.0 - b1) * grads[i];
      v = b2 * v + (1.0 - b2) * grads[i] * grads[i];
      const double rho = rho_inf - 2.0 * t * std::pow(b2, t) / (1.0 - std::pow(b2, t));
      if (rho >= 5.0) {
        const double r = std::sqrt((rho - 4) * (rho - 2) * rho_inf /
                                   ((rho_inf - 4) * (rho_inf - 2) * rho));
        p -= lr * wd * p;
        p -= lr * r * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t)) * m /
             (std::sqrt(v) + eps);
      } else if (fallback == RAdamFallback::kSgd) {
        p -= lr * wd * p;
        p -= lr / (1.0 - std::pow(b1, t)) * m;
      }
      EXPECT_NEAR(got[i], p, 1e-14) << to_string(fallback) << " step " << t;
    }
  }
}

// ---------------------------------------------------------------------------------------------

struct Params {
  torch::Tensor w, b, e;  // float64 (3,4), float32 (4), float64 (2,3,2)
  train::NamedTensors named() const {
    return {{"encoder.fc1.weight", w}, {"encoder.fc1.bias", b}, {"decoder.embed", e}};
  }
};

Params make_params() {
  torch::manual_seed(7);
  return {torch::randn({3, 4}, torch::kFloat64).set_requires_grad(true),
          torch::randn({4}, torch::kFloat32).set_requires_grad(true),
          torch::randn({2, 3, 2}, torch::kFloat64).set_requires_grad(true)};
}

Params copy_params(const Params& p) {
  auto c = [](const torch::Tensor& t) { return t.detach().clone().set_requires_grad(true); };
  return {c(p.w), c(p.b), c(p.e)};
}

// Deterministic gradients of step k; the bias has none at step 2 (skipped that step).
void set_grads(Params& p, int k) {
  torch::manual_seed(100 + k);
  p.w.mutable_grad() = torch::randn({3, 4}, torch::kFloat64);
  p.b.mutable_grad() = k == 2 ? torch::Tensor() : torch::randn({4}, torch::kFloat32);
  p.e.mutable_grad() = torch::randn({2, 3, 2}, torch::kFloat64);
}

double lr_of(int k) { return 0.01 * (1.0 + 0.3 * k); }

std::vector<OptimizerConfig> every_kind() {
  std::vector<OptimizerConfig> out;
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.momentum = 0.9;
  sgd.nesterov = true;
  sgd.weight_decay = 1e-2;
  out.push_back(sgd);
  for (auto k : {OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    OptimizerConfig c;
    c.kind = k;
    c.weight_decay = 1e-2;
    out.push_back(c);
  }
  out.push_back(radam(RAdamFallback::kSgd, 1e-2));
  out.push_back(radam(RAdamFallback::kSkip, 1e-2));
  OptimizerConfig lion;
  lion.kind = OptimizerKind::kLion;
  lion.betas = train::default_betas(OptimizerKind::kLion);
  lion.weight_decay = 1e-2;
  out.push_back(lion);
  // muon: Muon on w (a 2-D "encoder.fc1.weight"), AdamW on b and e (1-D, 3-D); with its
  // defaults, then with every Muon option changed.
  OptimizerConfig muon;
  muon.kind = OptimizerKind::kMuon;
  muon.betas = train::default_betas(OptimizerKind::kMuon);
  muon.weight_decay = 1e-2;
  out.push_back(muon);
  muon.muon_momentum = 0.9;
  muon.muon_nesterov = false;
  muon.muon_ns_steps = 3;
  muon.muon_adjust_lr = train::MuonAdjustLr::kOriginal;
  muon.weight_decay = 0.1;  // independent, below
  muon.weight_decay_mode = train::WeightDecayMode::kIndependent;
  muon.peak_lr = 0.05;
  out.push_back(muon);
  // adamw-schedulefree with its betas, weight decay and its own warm-up over the first 3 steps.
  OptimizerConfig schedule_free;
  schedule_free.kind = OptimizerKind::kAdamWScheduleFree;
  schedule_free.betas = train::default_betas(OptimizerKind::kAdamWScheduleFree);
  schedule_free.weight_decay = 1e-2;
  schedule_free.warmup_steps = 3;
  out.push_back(schedule_free);
  // --weight-decay-mode independent (Wortsman et al. 2023), peak lr above every lr_of(k).
  for (auto k : {OptimizerKind::kAdamW, OptimizerKind::kLion}) {
    OptimizerConfig c;
    c.kind = k;
    c.weight_decay = 0.1;
    c.weight_decay_mode = train::WeightDecayMode::kIndependent;
    c.peak_lr = 0.05;
    out.push_back(c);
  }
  return out;
}

TEST(Optimizer, ResumeFromSavedStateIsBitExact) {
  constexpr int kTotal = 10, kSplit = 4;
  for (const auto& config : every_kind()) {
    const auto label =
        to_string(config.kind) + "/" + to_string(config.radam_fallback) + "/" + to_string(config.weight_decay_mode);
    auto straight = make_params();
    train::Optimizer a(straight.named(), config);
    for (int k = 1; k <= kTotal; ++k) {
      set_grads(straight, k);
      a.step(lr_of(k));
    }

    auto first = make_params();
    train::Optimizer b(first.named(), config);
    for (int k = 1; k <= kSplit; ++k) {
      set_grads(first, k);
      b.step(lr_of(k));
    }
    const auto path = temp_path("optimizer_state.pt");
    model::save_tensors(path, b.state());
    auto resumed = copy_params(first);
    train::Optimizer c(resumed.named(), config);
    c.load_state(model::load_tensors(path));
    std::filesystem::remove(path);
    EXPECT_EQ(c.steps(), kSplit) << label;
    for (int k = kSplit + 1; k <= kTotal; ++k) {
      set_grads(resumed, k);
      c.step(lr_of(k));
    }

    EXPECT_EQ(c.steps(), kTotal);
    EXPECT_TRUE(torch::equal(straight.w, resumed.w)) << label;
    EXPECT_TRUE(torch::equal(straight.b, resumed.b)) << label;
    EXPECT_TRUE(torch::equal(straight.e, resumed.e)) << label;
    EXPECT_FALSE(torch::equal(straight.w, make_params().w)) << label << ": nothing moved";
    const auto sa = a.state(), sc = c.state();
    ASSERT_EQ(sa.size(), sc.size()) << label;
    for (const auto& [key, t] : sa) {
      ASSERT_TRUE(sc.count(key)) << label << " " << key;
      EXPECT_EQ(t.scalar_type(), sc.at(key).scalar_type()) << key;
      EXPECT_TRUE(torch::equal(t, sc.at(key))) << label << " " << key;
    }
  }
}

TEST(Optimizer, StateNamesAndPerParameterSteps) {
  OptimizerConfig c;  // adamw
  auto p = make_params();
  train::Optimizer opt(p.named(), c);
  for (int k = 1; k <= 3; ++k) {
    set_grads(p, k);
    opt.step(0.01);
  }
  const auto s = opt.state();
  EXPECT_EQ(s.at("steps").item<int64_t>(), 3);
  EXPECT_EQ(s.at("step.encoder.fc1.weight").item<int64_t>(), 3);
  EXPECT_EQ(s.at("step.encoder.fc1.bias").item<int64_t>(), 2);  // no gradient at step 2
  EXPECT_EQ(s.at("exp_avg_sq.encoder.fc1.bias").scalar_type(), torch::kFloat32);
  EXPECT_EQ(s.size(), 1u + 3u * 3u);
  // state() copies: stepping again does not change what was returned.
  const auto before = s.at("exp_avg.decoder.embed").clone();
  set_grads(p, 4);
  opt.step(0.01);
  EXPECT_TRUE(torch::equal(before, s.at("exp_avg.decoder.embed")));

  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.momentum = 0.5;
  auto q = make_params();
  train::Optimizer o2(q.named(), sgd);
  set_grads(q, 1);
  o2.step(0.1);
  const auto s2 = o2.state();
  EXPECT_EQ(s2.size(), 4u);
  EXPECT_TRUE(s2.count("momentum_buffer.encoder.fc1.weight"));
}

// Lion keeps m alone ("exp_avg.", Chen et al. 2023 Algorithm 2: no step count, no second
// moment); AdamW's state is not Lion's, nor Lion's AdamW's.
TEST(Optimizer, LionStateIsItsMomentumAlone) {
  OptimizerConfig lion;
  lion.kind = OptimizerKind::kLion;
  auto p = make_params();
  train::Optimizer opt(p.named(), lion);
  set_grads(p, 1);
  opt.step(0.01);
  set_grads(p, 2);  // no gradient for the bias: its m stays as it was
  const auto bias_m = opt.state().at("exp_avg.encoder.fc1.bias").clone();
  opt.step(0.01);
  const auto s = opt.state();
  EXPECT_EQ(s.size(), 1u + 3u);
  EXPECT_EQ(s.at("steps").item<int64_t>(), 2);
  EXPECT_EQ(s.at("exp_avg.encoder.fc1.bias").scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(s.at("exp_avg.encoder.fc1.bias"), bias_m));
  // After one update m = (1 - b2) g_1 (b2 = 0.98 here, OptimizerConfig's default betas).
  set_grads(p, 1);
  EXPECT_TRUE(torch::allclose(bias_m, p.b.grad() * 0.02, 1e-6, 0.0));

  auto q = make_params();
  train::Optimizer adamw(q.named(), OptimizerConfig{});
  set_grads(q, 1);
  adamw.step(0.01);
  auto r = make_params();
  EXPECT_THROW(train::Optimizer(r.named(), lion).load_state(adamw.state()), std::runtime_error);
  EXPECT_THROW(train::Optimizer(r.named(), OptimizerConfig{}).load_state(s), std::runtime_error);
}

// adamw-schedulefree's two points (Defazio et al. 2024): the parameters train at y and are
// evaluated at x = (y - (1 - b1) z)/b1; state() records the point, and a run resumed at x (the
// trainer's checkpoints) continues bit for bit as one that moved to x and back at the same step.
TEST(Optimizer, ScheduleFreeEvaluatesAtTheAverageAndResumesThere) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamWScheduleFree;
  c.betas = train::default_betas(OptimizerKind::kAdamWScheduleFree);
  c.weight_decay = 1e-2;
  c.warmup_steps = 2;
  constexpr int kTotal = 6, kSplit = 3;
  auto straight = make_params();
  train::Optimizer a(straight.named(), c);
  auto first = make_params();
  train::Optimizer b(first.named(), c);
  for (int k = 1; k <= kSplit; ++k) {
    set_grads(straight, k);
    a.step(lr_of(k));
    set_grads(first, k);
    b.step(lr_of(k));
  }
  const auto y = straight.w.detach().clone();
  const auto z = a.state().at("z.encoder.fc1.weight");
  {
    const train::AtEvaluationPoint at_x(a);
    EXPECT_TRUE(a.at_evaluation_point());
    EXPECT_THROW(a.step(0.01), std::logic_error);
    EXPECT_TRUE(torch::allclose(straight.w, (y - 0.1 * z) / 0.9, 1e-12, 1e-12));
    EXPECT_FALSE(torch::allclose(straight.w, y, 1e-6, 0.0)) << "x and y are one point";
  }
  EXPECT_FALSE(a.at_evaluation_point());
  EXPECT_TRUE(torch::allclose(straight.w, y, 1e-12, 1e-12));  // back at y, to rounding

  b.to_evaluation_point();
  const auto path = temp_path("schedule_free_state.pt");
  model::save_tensors(path, b.state());
  auto resumed = copy_params(first);  // x, as a checkpoint's model
  train::Optimizer r(resumed.named(), c);
  r.load_state(model::load_tensors(path));
  std::filesystem::remove(path);
  EXPECT_TRUE(r.at_evaluation_point());
  r.to_training_point();
  for (int k = kSplit + 1; k <= kTotal; ++k) {
    set_grads(straight, k);
    a.step(lr_of(k));
    set_grads(resumed, k);
    r.step(lr_of(k));
  }
  EXPECT_TRUE(torch::equal(straight.w, resumed.w));
  EXPECT_TRUE(torch::equal(straight.b, resumed.b));
  EXPECT_TRUE(torch::equal(straight.e, resumed.e));
  const auto s = r.state();
  EXPECT_EQ(s.at("schedule_free.step").item<int64_t>(), kTotal);
  EXPECT_EQ(s.at("schedule_free.evaluation_point").item<int64_t>(), 0);
  EXPECT_EQ(s.at("schedule_free.weight_sum").scalar_type(), torch::kFloat64);

  // Another optimiser's state is refused, and its own by another optimiser.
  auto q = make_params();
  train::Optimizer adamw(q.named(), OptimizerConfig{});
  set_grads(q, 1);
  adamw.step(0.01);
  auto fresh = make_params();
  EXPECT_THROW(train::Optimizer(fresh.named(), c).load_state(adamw.state()), std::runtime_error);
  EXPECT_THROW(train::Optimizer(fresh.named(), OptimizerConfig{}).load_state(s), std::runtime_error);
  // The one-point optimisers move nothing.
  const auto before = q.w.detach().clone();
  adamw.to_evaluation_point();
  EXPECT_FALSE(adamw.at_evaluation_point());
  EXPECT_TRUE(torch::equal(q.w, before));
}

// muon keeps Muon's momentum for its matrices ("momentum_buffer.", torch.optim.Muon's M) and the
// Adam family's state for the others; a state of AdamW, SGD or its own on other parameters is refused.
TEST(Optimizer, MuonStateIsMomentumForMatricesAndAdamWsForTheRest) {
  OptimizerConfig muon;
  muon.kind = OptimizerKind::kMuon;
  auto p = make_params();
  train::Optimizer opt(p.named(), muon);
  set_grads(p, 1);
  const auto g1 = p.w.grad().clone();
  opt.step(0.01);
  // M_1 = lerp(0, g_1, 1 - mu) = (1 - mu) g_1, mu = 0.95 (torch's default).
  EXPECT_TRUE(torch::allclose(opt.state().at("momentum_buffer.encoder.fc1.weight"), g1 * 0.05, 1e-15, 0.0));
  set_grads(p, 2);  // no gradient for the bias
  opt.step(0.01);
  const auto s = opt.state();
  // steps, w's momentum, and step/exp_avg/exp_avg_sq of b and e.
  EXPECT_EQ(s.size(), 1u + 1u + 2u * 3u);
  EXPECT_EQ(s.at("steps").item<int64_t>(), 2);
  EXPECT_EQ(s.at("step.decoder.embed").item<int64_t>(), 2);
  EXPECT_EQ(s.at("step.encoder.fc1.bias").item<int64_t>(), 1);
  EXPECT_EQ(s.at("exp_avg.encoder.fc1.bias").scalar_type(), torch::kFloat32);
  for (const char* absent : {"exp_avg.encoder.fc1.weight", "step.encoder.fc1.weight", "momentum_buffer.decoder.embed",
                             "momentum_buffer.encoder.fc1.bias"})
    EXPECT_EQ(s.count(absent), 0u) << absent;

  auto expect_refused = [](const OptimizerConfig& into, const train::TensorMap& state, const std::string& needle) {
    auto q = make_params();
    train::Optimizer fresh(q.named(), into);
    try {
      fresh.load_state(state);
      ADD_FAILURE() << "accepted, expected: " << needle;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const auto state_of = [](const OptimizerConfig& c) {
    auto q = make_params();
    train::Optimizer o(q.named(), c);
    set_grads(q, 1);
    o.step(0.01);
    return o.state();
  };
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::kSgd;
  sgd.momentum = 0.9;
  expect_refused(muon, state_of(OptimizerConfig{}), "'encoder.fc1.weight' is a matrix that --optimizer muon updates");
  expect_refused(muon, state_of(sgd), "is state of another optimiser than --optimizer muon");
  expect_refused(OptimizerConfig{}, s, "'momentum_buffer.encoder.fc1.weight' is state of another optimiser");
  auto q = make_params();
  train::Optimizer again(q.named(), muon);
  again.load_state(s);
  EXPECT_EQ(again.steps(), 2);
}

// Newton-Schulz orthogonalises (Jordan et al. 2024): from a zero matrix, with mu = 0 (M = U = g),
// lr 1 and no decay, one step gives p = -s O, and O has g's singular vectors with singular values
// in (0.5, 1.5) (Jordan et al.: S' ~ Uniform(0.5, 1.5) in place of the polar factor's 1s) while
// g's span 10, 3, 1, 0.3. s = sqrt(max(1, A/B)) (original) or 0.2 sqrt(max(A, B)) (Liu et al.).
TEST(Optimizer, MuonStepIsTheScaledOrthogonalisedGradient) {
  torch::manual_seed(3);
  const auto u = std::get<0>(torch::linalg_qr(torch::randn({6, 4}, torch::kFloat64)));  // 6 x 4, orthonormal columns
  const auto v = std::get<0>(torch::linalg_qr(torch::randn({4, 4}, torch::kFloat64)));
  const auto g = u.matmul(torch::diag(torch::tensor({10.0, 3.0, 1.0, 0.3}, torch::kFloat64))).matmul(v.t());
  for (const bool tall : {true, false}) {  // 6 x 4 (transposed inside), 4 x 6
    const auto grad = (tall ? g : g.t()).contiguous();
    const auto left = tall ? u : v, right = tall ? v : u;
    std::vector<torch::Tensor> steps;
    for (const auto adjust : {train::MuonAdjustLr::kOriginal, train::MuonAdjustLr::kMatchRmsAdamW}) {
      OptimizerConfig c;
      c.kind = OptimizerKind::kMuon;
      c.muon_momentum = 0.0;
      c.muon_adjust_lr = adjust;
      auto w = torch::zeros_like(grad).set_requires_grad(true);
      train::Optimizer opt({{"encoder.layers.0.fc1.weight", w}}, c);
      w.mutable_grad() = grad.clone();
      opt.step(1.0);
      steps.push_back(w.detach().clone());
    }
    const double s_original = tall ? std::sqrt(6.0 / 4.0) : 1.0, s_moonlight = 0.2 * std::sqrt(6.0);
    const auto o = -steps[0] / s_original;
    EXPECT_TRUE(torch::allclose(-steps[1] / s_moonlight, o, 1e-15, 0.0)) << "one O, two scales";
    const auto d = left.t().matmul(o).matmul(right);  // O in g's singular vectors
    const auto diagonal = torch::diagonal(d);
    EXPECT_GT(diagonal.min().item<double>(), 0.5) << diagonal;
    EXPECT_LT(diagonal.max().item<double>(), 1.5) << diagonal;
    EXPECT_LT((d - torch::diag(diagonal)).abs().max().item<double>(), 0.06) << d;
    EXPECT_LT((o - left.matmul(d).matmul(right.t())).abs().max().item<double>(), 0.06) << "outside g's span";
  }
}

// Which parameters muon updates with Muon in every built-in model kind, against a pattern written
// here from model/layers.cpp and model/attention.cpp: the four attention projections and the two
// FFN matrices of every layer; and, by name, the embeddings, output layers and heads that go to
// AdamW with every bias, gain and scalar (Jordan et al.'s and Moonlight's split).
TEST(Optimizer, MuonUpdatesTheLayersMatricesOfEveryModelKind) {
  const std::regex hidden(R"((encoder|decoder)\.layers\.[0-9]+\.((self_attn|encoder_attn)\.(q|k|v|out)_proj|fc1|fc2)\.weight)");
  struct Kind {
    std::string label;
    model::ModelConfig config;
    size_t matrices;                   // 6 per encoder or decoder-only layer, 10 per encoder-decoder decoder layer
    std::vector<std::string> adamw;    // 2-D, AdamW's
  };
  std::vector<Kind> kinds;
  auto c = test::tiny_config("pre-ln+qk-norm");  // 2 + 2 layers, d 16
  c.positions = model::PositionEmbedding::kLearned;
  c.share = model::SharedEmbeddings::kNone;
  kinds.push_back({"encoder-decoder", c, 2 * 6 + 2 * 10,
                   {"encoder.embed_tokens.weight", "encoder.embed_positions.weight", "decoder.embed_tokens.weight",
                    "decoder.embed_positions.weight", "decoder.output_projection.weight"}});
  c = test::tiny_config("admin");
  c.share = model::SharedEmbeddings::kAll;
  kinds.push_back({"encoder-decoder, shared", c, 2 * 6 + 2 * 10, {"encoder.embed_tokens.weight"}});
  c = test::tiny_config("post-ln");
  c.kind = model::kDecoderOnly;
  c.encoder_layers = 0;
  c.decoder_layers = 3;
  c.share = model::SharedEmbeddings::kNone;
  c.positions = model::PositionEmbedding::kLearned;
  kinds.push_back({"decoder-only", c, 3 * 6,
                   {"decoder.embed_tokens.weight", "decoder.embed_positions.weight", "decoder.output_projection.weight"}});
  c = test::tiny_config("pre-ln");
  c.kind = model::kEncoderOnly;
  c.decoder_layers = 0;
  c.share = model::SharedEmbeddings::kNone;
  c.positions = model::PositionEmbedding::kLearned;
  c.embedding_norm = true;
  c.segment_types = 2;
  kinds.push_back({"encoder-only", c, 2 * 6,
                   {"encoder.embed_tokens.weight", "encoder.embed_positions.weight", "encoder.segment_embeddings.weight",
                    "lm_head.dense.weight", "lm_head.weight"}});
  c.classes = 3;
  kinds.push_back({"classifier", c, 2 * 6,
                   {"encoder.embed_tokens.weight", "encoder.embed_positions.weight", "encoder.segment_embeddings.weight",
                    "classification_head.dense.weight", "classification_head.out_proj.weight"}});
  for (const auto& kind : kinds) {
    const auto net = model::create_model(kind.config);
    size_t matrices = 0;
    std::set<std::string> adamw_matrices;
    for (const auto& item : net->named_parameters()) {
      const auto& name = item.key();
      const auto& p = item.value();
      const bool expected = p.dim() == 2 && std::regex_match(name, hidden);
      EXPECT_EQ(train::muon_updates(name, p), expected) << kind.label << ": " << name;
      matrices += expected;
      if (p.dim() == 2 && !expected) adamw_matrices.insert(name);
    }
    EXPECT_EQ(matrices, kind.matrices) << kind.label;
    EXPECT_EQ(adamw_matrices, std::set<std::string>(kind.adamw.begin(), kind.adamw.end())) << kind.label;
  }
  // The rule is by name parts, not substrings: attention's out_proj is Muon's, the head's AdamW's.
  const auto m = torch::zeros({4, 4});
  EXPECT_TRUE(train::muon_updates("decoder.layers.0.self_attn.out_proj.weight", m));
  EXPECT_FALSE(train::muon_updates("classification_head.out_proj.weight", m));
  EXPECT_TRUE(train::muon_updates("encoder.layers.0.my_embed_tokens.weight", m));
  EXPECT_FALSE(train::muon_updates("encoder.layers.0.fc1.bias", torch::zeros({4})));
  EXPECT_FALSE(train::muon_updates("encoder.layers.0.fc1.weight", torch::zeros({2, 2, 2})));
}

TEST(Optimizer, LoadStateRejectsForeignState) {
  auto p = make_params();
  OptimizerConfig c;
  train::Optimizer opt(p.named(), c);
  set_grads(p, 1);
  opt.step(0.01);
  const auto good = opt.state();
  auto expect_error = [&](train::TensorMap s, const std::string& needle) {
    auto q = make_params();
    train::Optimizer fresh(q.named(), c);
    try {
      fresh.load_state(s);
      ADD_FAILURE() << "accepted state, expected: " << needle;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto s = good;
  s.erase("steps");
  expect_error(s, "'steps'");
  s = good;
  s["exp_avg.no.such.param"] = torch::zeros({2});
  expect_error(s, "exp_avg.no.such.param");
  s = good;
  s["exp_avg.decoder.embed"] = torch::zeros({3, 2, 2}, torch::kFloat64);
  expect_error(s, "exp_avg.decoder.embed");
  s = good;
  s.erase("exp_avg_sq.encoder.fc1.weight");
  expect_error(s, "encoder.fc1.weight");
  // Adam state into SGD.
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::kSgd;
  auto q = make_params();
  train::Optimizer o(q.named(), sgd);
  EXPECT_THROW(o.load_state(good), std::runtime_error);
}

TEST(Optimizer, RecordsUpdatesOnlyWhenAsked) {
  auto p = make_params();
  train::Optimizer opt(p.named(), OptimizerConfig{});
  set_grads(p, 1);
  opt.step(0.01);
  EXPECT_TRUE(opt.last_updates().empty());
  set_grads(p, 2);  // the bias has no gradient: no update recorded for it
  const auto w_old = p.w.detach().clone(), b_old = p.b.detach().clone();
  opt.step(0.01, /*record_updates=*/true);
  const auto& u = opt.last_updates();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_TRUE(torch::equal(u.at("encoder.fc1.weight"), p.w.detach() - w_old));
  EXPECT_FALSE(u.at("encoder.fc1.weight").requires_grad());
  EXPECT_TRUE(torch::equal(p.b.detach(), b_old));
  EXPECT_EQ(u.count("encoder.fc1.bias"), 0u);
  set_grads(p, 3);
  opt.step(0.01);
  EXPECT_TRUE(opt.last_updates().empty());
}

TEST(Optimizer, ZeroGradClearsGradients) {
  auto p = make_params();
  train::Optimizer opt(p.named(), OptimizerConfig{});
  set_grads(p, 1);
  opt.zero_grad();
  EXPECT_FALSE(p.w.grad().defined());
  const auto w = p.w.detach().clone();
  opt.step(0.1);  // nothing to do
  EXPECT_TRUE(torch::equal(w, p.w));
  EXPECT_EQ(opt.steps(), 1);
  EXPECT_EQ(opt.state().size(), 1u);
}

TEST(Optimizer, RejectsBadParameters) {
  auto w = torch::zeros({2}, torch::kFloat64);
  EXPECT_THROW(train::Optimizer({{"a", w}, {"a", torch::zeros({2})}}, OptimizerConfig{}),
               std::invalid_argument);
  EXPECT_THROW(train::Optimizer({{"a", w}, {"b", w}}, OptimizerConfig{}), std::invalid_argument);
  EXPECT_THROW(train::Optimizer({{"", w}}, OptimizerConfig{}), std::invalid_argument);
  EXPECT_THROW(train::Optimizer({{"i", torch::zeros({2}, torch::kInt64)}}, OptimizerConfig{}),
               std::invalid_argument);
  train::Optimizer ok({{"a", w}}, OptimizerConfig{});
  EXPECT_THROW(ok.step(-1e-3), std::invalid_argument);
  EXPECT_THROW(ok.step(std::nan("")), std::invalid_argument);
  OptimizerConfig bad;
  bad.eps = -1.0;
  EXPECT_THROW(train::Optimizer({{"a", w}}, bad), std::invalid_argument);
}

TEST(OptimizerConfig, ProblemsListsEveryBadValue) {
  EXPECT_TRUE(OptimizerConfig{}.problems().empty());
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdam;
  c.betas = {0.9, 1.0};
  c.eps = -1e-8;
  c.weight_decay = -0.1;
  c.momentum = 0.9;
  c.radam_fallback = RAdamFallback::kSgd;
  const auto p = c.problems();
  ASSERT_EQ(p.size(), 5u);
  for (const char* option : {"--betas", "--eps", "--weight-decay", "--momentum", "--radam-fallback"}) {
    bool found = false;
    for (const auto& s : p) found |= s.rfind(option, 0) == 0;
    EXPECT_TRUE(found) << option;
  }
  OptimizerConfig n;
  n.kind = OptimizerKind::kSgd;
  n.nesterov = true;
  ASSERT_EQ(n.problems().size(), 1u);
  EXPECT_NE(n.problems()[0].find("--nesterov needs --momentum"), std::string::npos);
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

// Wortsman et al. 2023's independent decay, p *= 1 - wd lr_t / lr_peak: with zero gradients
// neither AdamW (m = v = 0: a zero update) nor Lion (sign(0) = 0) moves p but by the decay, so
// p after the rates lr_t is prod(1 - wd lr_t / lr_peak), whatever the size of the peak itself;
// --weight-decay-mode lr (torch's) gives prod(1 - wd lr_t).
TEST(OptimizerConfig, IndependentWeightDecayFollowsTheScheduleNotThePeak) {
  const double wd = 0.1;
  const std::vector<double> shape{1.0, 0.5, 0.25, 0.0, 1.0};  // lr_t / lr_peak
  for (const auto kind : {OptimizerKind::kAdamW, OptimizerKind::kLion}) {
    for (const double peak : {1e-4, 3e-2}) {
      // p after the rates s * peak under `mode`, and the product of (1 - wd s factor) it should be
      auto decayed = [&](train::WeightDecayMode mode, double factor) {
        OptimizerConfig c;
        c.kind = kind;
        c.weight_decay = wd;
        c.weight_decay_mode = mode;
        c.peak_lr = peak;
        auto p = scalar_param(1.0);
        train::Optimizer opt({{"p", p}}, c);
        double want = 1.0;
        for (double s : shape) {
          p.mutable_grad() = torch::zeros({1}, torch::kFloat64);
          opt.step(s * peak);
          want *= 1.0 - wd * s * factor;
        }
        return std::make_pair(p.item<double>(), want);
      };
      const auto [independent, want] = decayed(train::WeightDecayMode::kIndependent, 1.0);  // 0.9 0.95 0.975 1 0.9
      EXPECT_NEAR(independent, want, 1e-15) << to_string(kind) << " peak " << peak;
      const auto [coupled, torch_want] = decayed(train::WeightDecayMode::kLr, peak);  // torch.optim.AdamW, lion-pytorch
      EXPECT_NEAR(coupled, torch_want, 1e-15) << to_string(kind) << " peak " << peak;
    }
  }
}

TEST(OptimizerConfig, WeightDecayModeProblems) {
  OptimizerConfig c;  // adamw
  c.weight_decay_mode = train::WeightDecayMode::kIndependent;
  ASSERT_EQ(c.problems().size(), 1u);  // no peak lr given
  EXPECT_EQ(c.problems()[0],
            "--weight-decay-mode independent divides by the peak --lr, which must be positive, got 0");
  c.peak_lr = 5e-4;
  EXPECT_TRUE(c.problems().empty());
  EXPECT_DOUBLE_EQ(c.decoupled_weight_decay(), 0.0);  // --weight-decay 0: no decay in either mode
  c.weight_decay = 0.1;
  EXPECT_DOUBLE_EQ(c.decoupled_weight_decay(), 200.0);  // 0.1 / 5e-4: p *= 1 - lr_t 200
  for (const auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kRAdam}) {
    c.kind = kind;
    ASSERT_EQ(c.problems().size(), 1u) << to_string(kind);
    EXPECT_EQ(c.problems()[0],
              "--weight-decay-mode applies to --optimizer adamw|lion|muon (decoupled weight decay) only, not " +
                  to_string(kind));
  }
  c.kind = OptimizerKind::kLion;
  EXPECT_TRUE(c.problems().empty());
  c.weight_decay_mode = train::WeightDecayMode::kLr;
  EXPECT_DOUBLE_EQ(c.decoupled_weight_decay(), 0.1);
}

// Muon's options are muon's alone, one line naming those given; its ranges; --momentum and
// --nesterov (sgd's) are refused for muon pointing at its own.
TEST(OptimizerConfig, MuonOptionsProblems) {
  OptimizerConfig c;  // adamw
  c.muon_momentum = 0.9;
  ASSERT_EQ(c.problems().size(), 1u);
  EXPECT_EQ(c.problems()[0], "--muon-momentum applies to --optimizer muon only, not adamw");
  c.kind = OptimizerKind::kSgd;
  c.muon_momentum = 0.95;
  c.muon_nesterov = false;
  c.muon_ns_steps = 3;
  c.muon_adjust_lr = train::MuonAdjustLr::kOriginal;
  ASSERT_EQ(c.problems().size(), 1u);
  EXPECT_EQ(c.problems()[0],
            "--muon-nesterov, --muon-ns-steps and --muon-adjust-lr apply to --optimizer muon only, not sgd");
  c.kind = OptimizerKind::kMuon;
  EXPECT_TRUE(c.problems().empty());
  c.momentum = 0.9;
  c.adam_init_v = train::AdamInitV::kGradSquared;
  c.radam_fallback = RAdamFallback::kSgd;
  const auto p = c.problems();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "--momentum and --nesterov apply to --optimizer sgd only, not muon (muon's are --muon-momentum and "
                  "--muon-nesterov, its AdamW's --betas)");
  EXPECT_EQ(p[1], "--radam-fallback applies to --optimizer radam only, not muon");
  EXPECT_EQ(p[2], "--adam-init-v applies to --optimizer adam|adamw|radam only, not muon");
  OptimizerConfig r;
  r.kind = OptimizerKind::kMuon;
  r.muon_momentum = 1.0;
  r.muon_ns_steps = 0;
  const auto q = r.problems();
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0], "--muon-momentum must be in [0, 1), got 1");
  EXPECT_EQ(q[1], "--muon-ns-steps must be in [1, 99], got 0");
  r.muon_momentum = 0.0;  // mu = 0: the gradient orthogonalised
  r.muon_ns_steps = 99;
  r.weight_decay_mode = train::WeightDecayMode::kIndependent;  // both parts' decoupled decay
  r.peak_lr = 1e-3;
  EXPECT_TRUE(r.problems().empty());
}

TEST(OptimizerConfig, ParsersAndJson) {
  for (const char* s : {"sgd", "adam", "adamw", "radam", "lion", "muon", "adamw-schedulefree"})
    EXPECT_EQ(to_string(train::parse_optimizer_kind(s)), s);
  EXPECT_EQ(train::parse_optimizer_kind("lion"), OptimizerKind::kLion);
  EXPECT_EQ(train::parse_optimizer_kind("muon"), OptimizerKind::kMuon);
  // --betas where none is given: Chen et al. 2023's (lion-pytorch's) for lion, Jordan et al.'s and
  // Moonlight's AdamW betas for muon, Vaswani's else.
  EXPECT_EQ(train::default_betas(OptimizerKind::kLion), (std::array<double, 2>{0.9, 0.99}));
  EXPECT_EQ(train::default_betas(OptimizerKind::kMuon), (std::array<double, 2>{0.9, 0.95}));
  EXPECT_EQ(train::default_betas(OptimizerKind::kAdamWScheduleFree), (std::array<double, 2>{0.9, 0.999}));
  EXPECT_TRUE(train::replaces_schedule(OptimizerKind::kAdamWScheduleFree));
  EXPECT_FALSE(train::replaces_schedule(OptimizerKind::kAdamW));
  for (const auto k : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kRAdam})
    EXPECT_EQ(train::default_betas(k), (std::array<double, 2>{0.9, 0.98})) << to_string(k);
  EXPECT_THROW(train::parse_optimizer_kind("nag"), std::invalid_argument);
  EXPECT_EQ(train::parse_radam_fallback("sgd"), RAdamFallback::kSgd);
  EXPECT_THROW(train::parse_radam_fallback("none"), std::invalid_argument);
  const auto b = train::parse_betas("0.9,0.98");
  EXPECT_EQ(b[0], 0.9);
  EXPECT_EQ(b[1], 0.98);
  for (const char* s : {"0.9", "0.9,0.98,0.1", "0.9;0.98", "a,b", "0.9,0.98x", ""})
    EXPECT_THROW(train::parse_betas(s), std::invalid_argument) << s;
  OptimizerConfig c;
  c.kind = OptimizerKind::kRAdam;
  c.radam_fallback = RAdamFallback::kSgd;
  c.betas = {0.8, 0.99};
  const nlohmann::json j = c;
  EXPECT_EQ(nlohmann::json(j.get<OptimizerConfig>()), j);
  EXPECT_EQ(train::parse_weight_decay_mode("independent"), train::WeightDecayMode::kIndependent);
  EXPECT_THROW(train::parse_weight_decay_mode("decoupled"), std::invalid_argument);
  OptimizerConfig w;
  w.weight_decay_mode = train::WeightDecayMode::kIndependent;
  w.peak_lr = 1e-3;  // not in config.json: the command copies --lr
  const nlohmann::json jw = w;
  EXPECT_EQ(jw.at("weight_decay_mode"), "independent");
  EXPECT_FALSE(jw.contains("peak_lr"));
  EXPECT_EQ(jw.get<OptimizerConfig>().weight_decay_mode, train::WeightDecayMode::kIndependent);
  auto old = j;  // a config.json from before the option: torch's decay
  old.erase("weight_decay_mode");
  EXPECT_EQ(old.get<OptimizerConfig>().weight_decay_mode, train::WeightDecayMode::kLr);
  OptimizerConfig m;
  m.kind = OptimizerKind::kMuon;
  m.muon_momentum = 0.9;
  m.muon_nesterov = false;
  m.muon_ns_steps = 4;
  m.muon_adjust_lr = train::MuonAdjustLr::kOriginal;
  const nlohmann::json jm = m;
  EXPECT_EQ(jm.at("muon_adjust_lr"), "original");
  EXPECT_EQ(jm.at("muon_nesterov"), false);
  EXPECT_EQ(nlohmann::json(jm.get<OptimizerConfig>()), jm);
  EXPECT_EQ(train::parse_muon_adjust_lr("match-rms-adamw"), train::MuonAdjustLr::kMatchRmsAdamW);
  EXPECT_THROW(train::parse_muon_adjust_lr("match_rms_adamw"), std::invalid_argument);
  auto before_muon = j;  // a config.json from before muon: its defaults
  for (const char* key : {"muon_momentum", "muon_nesterov", "muon_ns_steps", "muon_adjust_lr"}) before_muon.erase(key);
  const auto d = before_muon.get<OptimizerConfig>();
  EXPECT_EQ(d.muon_momentum, 0.95);
  EXPECT_TRUE(d.muon_nesterov);
  EXPECT_EQ(d.muon_ns_steps, 5);
  EXPECT_EQ(d.muon_adjust_lr, train::MuonAdjustLr::kMatchRmsAdamW);
}

// ---------------------------------------------------------------------------------------------

TEST(ClipGradNorm, HandValues) {
  // Gradients (3, 4) and (12): total norm 13.
  auto a = torch::zeros({2}, torch::kFloat64).set_requires_grad(true);
  auto b = torch::zeros({1}, torch::kFloat64).set_requires_grad(true);
  auto none = torch::zeros({5}, torch::kFloat64).set_requires_grad(true);  // no gradient
  auto set = [&] {
    a.mutable_grad() = torch::tensor({3.0, 4.0}, torch::kFloat64);
    b.mutable_grad() = torch::tensor({12.0}, torch::kFloat64);
  };
  set();
  EXPECT_DOUBLE_EQ(train::clip_grad_norm({a, none, b}, 0.0), 13.0);  // only measures
  EXPECT_EQ(a.grad()[1].item<double>(), 4.0);
  EXPECT_DOUBLE_EQ(train::clip_grad_norm({a, b}, 100.0), 13.0);  // below the limit: unchanged
  EXPECT_EQ(b.grad()[0].item<double>(), 12.0);
  EXPECT_DOUBLE_EQ(train::clip_grad_norm({a, b}, 6.5), 13.0);
  const double coef = 6.5 / (13.0 + 1e-6);  // torch's clip_coef
  EXPECT_NEAR(a.grad()[0].item<double>(), 3.0 * coef, 1e-15);
  EXPECT_NEAR(b.grad()[0].item<double>(), 12.0 * coef, 1e-15);
  EXPECT_NEAR(train::clip_grad_norm({a, b}, 0.0), 13.0 * coef, 1e-14);
  EXPECT_EQ(train::clip_grad_norm({none}, 1.0), 0.0);
  set();
  EXPECT_DOUBLE_EQ(train::clip_grad_norm(train::NamedTensors{{"a", a}, {"b", b}}, -1.0), 13.0);
}

// ---------------------------------------------------------------------------------------------

TEST(OptimizerDevice, CudaMatchesCpuInFloat64) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const auto& config : every_kind()) {
    auto cpu = make_params();
    auto to_cuda = [](const torch::Tensor& t) {
      return t.detach().to(torch::kCUDA).set_requires_grad(true);
    };
    Params gpu{to_cuda(cpu.w), to_cuda(cpu.b), to_cuda(cpu.e)};
    train::Optimizer oc(cpu.named(), config), og(gpu.named(), config);
    for (int k = 1; k <= 8; ++k) {
      set_grads(cpu, k);
      auto copy_grad = [](torch::Tensor& dst, const torch::Tensor& src) {
        dst.mutable_grad() = src.grad().defined() ? src.grad().to(torch::kCUDA) : torch::Tensor();
      };
      auto copy_grads = [&] {
        copy_grad(gpu.w, cpu.w);
        copy_grad(gpu.b, cpu.b);
        copy_grad(gpu.e, cpu.e);
      };
      copy_grads();
      // b is float32: CUDA accumulates its norm in float, the CPU in double (ATen's acc_type),
      // so the clipped totals agree to float32 only (first seen on an H100, issue 38) ...
      const double norm_cpu = train::clip_grad_norm(cpu.named(), 1.0);
      EXPECT_NEAR(train::clip_grad_norm(gpu.named(), 1.0), norm_cpu, 1e-6 * norm_cpu);
      copy_grads();  // ... and the optimisers are compared on the same clipped gradients
      oc.step(lr_of(k), true);
      og.step(lr_of(k), true);
    }
    const auto label = to_string(config.kind) + "/" + to_string(config.radam_fallback);
    // muon orthogonalises w in bfloat16 (as torch.optim.Muon): CPU and CUDA may round its products
    // differently, by a bfloat16 ulp (2^-8 relative) each. In a python simulation of 8 such steps
    // of every_kind's two muon configurations (unclipped gradients, the same rates), Newton-Schulz
    // in float32 instead of bfloat16 changed w by at most 5e-4; 2e-3 allows four times that, well
    // below the ~5e-2 that w moves.
    const bool bfloat16_step = config.kind == OptimizerKind::kMuon;
    EXPECT_TRUE(torch::allclose(cpu.w, gpu.w.cpu(), bfloat16_step ? 0.0 : 1e-12, bfloat16_step ? 2e-3 : 1e-14)) << label;
    EXPECT_TRUE(torch::allclose(cpu.b, gpu.b.cpu(), 1e-5, 1e-7)) << label;  // float32
    EXPECT_TRUE(torch::allclose(cpu.e, gpu.e.cpu(), 1e-12, 1e-14)) << label;
    EXPECT_EQ(og.last_updates().at("decoder.embed").device().type(), torch::kCUDA);
    const auto sg = og.state();
    EXPECT_EQ(sg.at("steps").device().type(), torch::kCPU);
    // A CUDA state loads into a CPU optimiser.
    auto back = copy_params(cpu);
    train::Optimizer ob(back.named(), config);
    ob.load_state(sg);
    EXPECT_EQ(ob.steps(), 8);
  }
}

}  // namespace

// Per-parameter lr multipliers (torch.optim's parameter groups with their own lr): AdamW with
// weight decay on a parameter at multiplier s moves exactly as the same optimiser at lr * s
// does on that parameter alone; multiplier 0 leaves it bit-identical over many steps.
TEST(Optimizer, LrScalesActAsEachParameterGroupsOwnLr) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.weight_decay = 0.1;
  const std::vector<double> grads{0.3, -1.2, 0.7, 2.0, -0.1};
  auto a = scalar_param(1.0), frozen = scalar_param(-2.0), alone = scalar_param(1.0);
  train::Optimizer grouped({{"a", a}, {"frozen", frozen}}, c);
  grouped.set_lr_scales({0.25, 0.0});
  train::Optimizer single({{"a", alone}}, c);
  for (double g : grads) {
    a.mutable_grad() = torch::full({1}, g, torch::kFloat64);
    frozen.mutable_grad() = torch::full({1}, 3 * g, torch::kFloat64);
    alone.mutable_grad() = torch::full({1}, g, torch::kFloat64);
    grouped.step(1e-2);
    single.step(1e-2 * 0.25);
  }
  EXPECT_EQ(a.item<double>(), alone.item<double>());
  EXPECT_EQ(frozen.item<double>(), -2.0);
  EXPECT_THROW(grouped.set_lr_scales({1.0}), std::invalid_argument);
  EXPECT_THROW(grouped.set_lr_scales({1.0, -0.5}), std::invalid_argument);
  EXPECT_THROW(grouped.set_lr_scales({1.0, std::nan("")}), std::invalid_argument);
}
