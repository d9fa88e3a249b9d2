// Curvature during training (issue 17): the preconditioned sharpness of a tiny Transformer
// against the dense eigenvalues of P^-1 H, warm-started against cold Lanczos on a matrix of
// known spectrum, and the stability thresholds against gradient descent on quadratics.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "analysis/curvature.h"
#include "analysis/lanczos.h"
#include "known_spectrum.h"
#include "tiny_hessian.h"
#include "train/optimizer.h"

namespace normlab::analysis {
namespace {

// P of REFERENCE §9 written out from the optimiser's saved state, parameter by parameter.
torch::Tensor expected_preconditioner(const train::Optimizer& opt, const FullDataHessian& h, train::Preconditioner kind,
                                      const torch::Tensor& gradient) {
  const auto state = opt.state();
  const auto [b1, b2] = opt.config().betas;
  const double eps = opt.config().eps;
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < h.params().size(); ++i) {
    const auto& name = h.params()[i].first;
    const auto v = state.at("exp_avg_sq." + name).reshape(-1);
    const double t = static_cast<double>(state.at("step." + name).item<int64_t>());
    if (kind == train::Preconditioner::kCurrent) {
      parts.push_back((v / (1 - std::pow(b2, t))).sqrt() + eps);
    } else if (kind == train::Preconditioner::kCohen) {  // Cohen et al. 2022 §2, their t + 1 = our t
      parts.push_back((1 - std::pow(b1, t)) * ((v / (1 - std::pow(b2, t))).sqrt() + eps));
    } else {
      const auto g = gradient.narrow(0, h.offset(i), h.params()[i].second.numel());
      const auto v_next = b2 * v + (1 - b2) * g * g;
      parts.push_back(((v_next / (1 - std::pow(b2, t + 1))).sqrt() + eps) * (1 - std::pow(b1, t + 1)));
    }
  }
  return torch::cat(parts);
}

TEST(Curvature, PreconditionedSharpnessIsTheTopEigenvalueOfPInverseH) {
  torch::set_num_threads(1);
  auto net = tiny_model();
  FullDataHessian h(net, tiny_batches(3), train::LossOptions{}, ".*", torch::kCPU);
  // An AdamW state from three updates at lr 0 (the parameters, and so H, do not move).
  train::NamedTensors named;
  for (const auto& p : net->named_parameters()) named.emplace_back(p.key(), p.value());
  train::OptimizerConfig oc;
  oc.betas = {0.9, 0.98};
  train::Optimizer opt(named, oc);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (int k = 0; k < 3; ++k) {
    for (auto& [name, p] : named) p.mutable_grad() = torch::randn(p.sizes(), gen, torch::kFloat64) * 0.1;
    opt.step(0.0);
  }
  const auto dense = full_matrix(h);  // (n,n)
  const auto gradient = h.gradient().first.clone();
  for (auto kind : {train::Preconditioner::kCurrent, train::Preconditioner::kNext, train::Preconditioner::kCohen}) {
    const auto p = adam_preconditioner(opt, h, kind, gradient);
    EXPECT_TRUE(torch::allclose(p, expected_preconditioner(opt, h, kind, gradient), 1e-12, 0)) << to_string(kind);
    // The definition: the largest (real) eigenvalue of the non-symmetric P^-1 H.
    const auto eigs = torch::linalg_eigvals(dense / p.unsqueeze(1));
    const double expected = torch::real(eigs).max().item<double>();
    EXPECT_LT(torch::imag(eigs).abs().max().item<double>(), 1e-6 * std::abs(expected));
    const auto d = p.rsqrt();
    const LinearOperator scaled = [&](const torch::Tensor& v) { return d * h.hvp(d * v); };
    const auto top = largest_eigenvalue(scaled, rademacher(h.dim(), 3, torch::kFloat64), 80);
    EXPECT_NEAR(top.value, expected, 1e-7 * std::abs(expected)) << to_string(kind);
    // The Ritz vector is an eigenvector of P^-1/2 H P^-1/2.
    const auto residual = (d * dense.mv(d * top.vector) - top.value * top.vector).norm().item<double>();
    EXPECT_LT(residual, 1e-3 * std::abs(top.value)) << to_string(kind);
  }
}

TEST(Curvature, WarmStartedAndColdLanczosFindTheSameTop) {
  std::vector<double> eigs;
  for (int i = 0; i < 300; ++i) eigs.push_back(-1.0 + 2.0 * i / 299.0);
  eigs.back() = 9.0;
  eigs[298] = 8.5;
  const auto a = with_spectrum(eigs, 11);
  const LinearOperator op = [&](const torch::Tensor& v) { return a.mv(v); };
  const auto cold = largest_eigenvalue(op, rademacher(300, 1, torch::kFloat64), 40);
  // Warm: the top Ritz vector of a nearby matrix (the previous measurement), then a few steps.
  std::vector<double> noise;
  for (int i = 0; i < 300; ++i) noise.push_back(std::sin(i));
  const auto previous = a + 0.05 * with_spectrum(noise, 12);
  const LinearOperator previous_op = [&](const torch::Tensor& v) { return previous.mv(v); };
  const auto start = largest_eigenvalue(previous_op, rademacher(300, 2, torch::kFloat64), 40).vector;
  const auto warm = largest_eigenvalue(op, start, 6);
  EXPECT_NEAR(cold.value, 9.0, 1e-9);
  EXPECT_NEAR(warm.value, 9.0, 1e-9);
  // From a random start, 6 steps are not enough: the warm start is what makes them enough.
  EXPECT_GT(9.0 - largest_eigenvalue(op, rademacher(300, 1, torch::kFloat64), 6).value, 1e-6);
}

// Gradient descent (with heavy-ball momentum beta) on f(x) = x^T A x / 2 converges when
// lambda_1(A) is below stability_threshold(lr) and diverges above: the closed form of each
// eigen-direction's recurrence (REFERENCE §9), here run through normlab's own SGD.
double final_norm(const torch::Tensor& a, double lr, double momentum) {
  auto x = torch::ones({a.size(0)}, torch::kFloat64);
  train::OptimizerConfig c;
  c.kind = train::OptimizerKind::kSgd;
  c.momentum = momentum;
  train::Optimizer opt({{"x", x}}, c);
  for (int k = 0; k < 3000; ++k) {
    x.mutable_grad() = a.mv(x);
    opt.step(lr);
  }
  return x.norm().item<double>() / std::sqrt(static_cast<double>(a.size(0)));
}

TEST(Curvature, GradientDescentDivergesExactlyAboveTheThreshold) {
  std::vector<double> eigs;
  for (int i = 0; i < 20; ++i) eigs.push_back(0.1 + 3.9 * i / 19.0);  // lambda_1 = 4
  const auto a = with_spectrum(eigs, 5);
  for (double momentum : {0.0, 0.9}) {
    train::OptimizerConfig c;
    c.kind = train::OptimizerKind::kSgd;
    c.momentum = momentum;
    const double lr_edge = (2.0 + 2.0 * momentum) / 4.0;  // threshold(lr_edge) = lambda_1
    EXPECT_NEAR(stability_threshold(c, lr_edge), 4.0, 1e-12);
    EXPECT_LT(final_norm(a, 0.99 * lr_edge, momentum), 1e-3) << "momentum " << momentum;
    EXPECT_GT(final_norm(a, 1.01 * lr_edge, momentum), 1e3) << "momentum " << momentum;
  }
  train::OptimizerConfig adam;  // AdamW, beta1 0.9: 38/lr
  EXPECT_NEAR(stability_threshold(adam, 1e-3), 38000.0, 1e-6);
  EXPECT_TRUE(std::isinf(stability_threshold(adam, 0.0)));
}

// One step from x on f(x) = x^T A x / 2 along -lr s changes f by -lr g.s + lr^2 s.As / 2
// (g = Ax): it increases f exactly above lr = 2 g.s / s.As. Gradient descent has s = g (and
// lr_c = 2/lambda_1 from the top eigenvector); Adam's first step s = g / (|g| + eps).
TEST(Curvature, CriticalLrOfAQuadraticIsItsClosedForm) {
  std::vector<double> eigs;
  for (int i = 0; i < 20; ++i) eigs.push_back(0.1 + 3.9 * i / 19.0);
  const auto a = with_spectrum(eigs, 5);
  auto x = torch::zeros({20}, torch::kFloat64);
  const train::NamedTensors params = {{"x", x}};
  const auto loss = [&] { return 0.5 * x.dot(a.mv(x)).item<double>(); };
  train::OptimizerConfig sgd;
  sgd.kind = train::OptimizerKind::kSgd;
  train::OptimizerConfig adam;  // AdamW, no weight decay
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  const auto top = std::get<1>(torch::linalg_eigh(a)).select(1, 19);
  for (const auto& start : {torch::randn({20}, gen, torch::kFloat64), top.clone()}) {
    x.copy_(start);
    const auto g = a.mv(x);
    const auto sgd_lr = critical_lr(params, {g}, sgd, loss, 1e-4, 1e2, 1e-6);
    EXPECT_TRUE(sgd_lr.bracketed);
    EXPECT_NEAR(sgd_lr.lr, 2 * g.dot(g).item<double>() / g.dot(a.mv(g)).item<double>(), 2e-6 * sgd_lr.lr);
    EXPECT_TRUE(torch::equal(x, start)) << "the parameters are restored";
    const auto s = g / (g.abs() + adam.eps);
    const auto adam_lr = critical_lr(params, {g}, adam, loss, 1e-4, 1e2, 1e-6);
    EXPECT_NEAR(adam_lr.lr, 2 * g.dot(s).item<double>() / s.dot(a.mv(s)).item<double>(), 2e-6 * adam_lr.lr);
  }
  EXPECT_NEAR(critical_lr(params, {a.mv(x)}, sgd, loss, 1e-4, 1e2, 1e-6).lr, 2.0 / 4.0, 2e-6);  // x = top
}

}  // namespace
}  // namespace normlab::analysis
