#include "analysis/advise.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "analysis/curvature.h"
#include "analysis/hvp.h"
#include "analysis/lanczos.h"
#include "core/file_io.h"
#include "core/problems.h"
#include "model/model.h"
#include "model/model.h"
#include "model/width.h"

namespace normlab::analysis {
namespace {

constexpr double kGrowthPerUpdate = 0.01;  // the proposal's warm-up: at most 1% more per update

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// ||dL/dW|| of layer `last` over layer 0's FFN W2 in `stack`, from the flat gradient.
double gradient_ratio(const FullDataHessian& h, const torch::Tensor& gradient, const std::string& stack,
                      int64_t last) {
  double first_norm = NAN, last_norm = NAN;
  for (size_t i = 0; i < h.params().size(); ++i) {
    const auto& name = h.params()[i].first;
    const auto norm = [&] { return gradient.narrow(0, h.offset(i), h.params()[i].second.numel()).norm().item<double>(); };
    if (name == stack + ".layers.0.fc2.weight") first_norm = norm();
    if (name == stack + ".layers." + std::to_string(last) + ".fc2.weight") last_norm = norm();
  }
  return last_norm / first_norm;
}

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

}  // namespace

std::vector<std::string> AdviseConfig::problems() const {
  std::vector<std::string> p;
  if (out.empty()) p.push_back("--out is required");
  if (!(lr > 0)) p.push_back("--lr must be > 0 (the target learning rate)");
  if (seeds < 1) p.push_back("--seeds must be >= 1, got " + std::to_string(seeds));
  if (batches < 1) p.push_back("--batches must be >= 1, got " + std::to_string(batches));
  if (lanczos_steps < 1) p.push_back("--lanczos-steps must be >= 1");
  if (!(lr_lo > 0 && lr_hi > lr_lo)) p.push_back("--critical-lr-range: need 0 < LO < HI");
  if (!(lr_tol > 0)) p.push_back("--critical-lr-tol must be > 0");
  if (!(label_smoothing >= 0 && label_smoothing < 1)) p.push_back("--label-smoothing must be in [0, 1)");
  for (auto& q : optimizer.problems()) p.push_back(q);
  if (auto q = curvature_problem(optimizer)) p.push_back(*q);
  if (auto q = model::one_rate_problem(model, "advise")) p.push_back(*q);
  for (auto& q : inputs.problems()) p.push_back(q);
  return p;
}

Advice advise(double lr_c, double lr) {
  Advice a;
  a.lr_c = lr_c;
  a.needs_warmup = lr > lr_c;
  a.evidence.push_back("target lr " + fmt(lr) + (a.needs_warmup ? " > " : " <= ") + "critical lr " + fmt(lr_c) +
                       " (x" + fmt(lr / lr_c) + "): the first step at the target " +
                       (a.needs_warmup ? "raises" : "lowers") + " the loss");
  if (a.needs_warmup) {
    a.warmup_init_lr = lr_c / 2;
    // The trainer's warm-up is linear (fairseq): its step (lr - init)/W is largest relative to
    // the rate at the start, so W = (lr - init) / (1% of init).
    a.warmup_steps = static_cast<int64_t>(std::ceil((lr - a.warmup_init_lr) / (kGrowthPerUpdate * a.warmup_init_lr)));
  }
  return a;
}

nlohmann::json run_advise(const AdviseConfig& c) {
  core::throw_if_problems(c.problems());
  const BatchSource source(c.inputs, c.out);
  auto m = c.model;
  m.src_vocab_size = m.tgt_vocab_size = source.vocab_size();
  std::vector<double> lr_cs, ratios, enc_ratios, dec_ratios;
  nlohmann::json seeds = nlohmann::json::array();
  for (int64_t s = 0; s < c.seeds; ++s) {
    const uint64_t seed = c.seed + static_cast<uint64_t>(s);
    auto batches = source.batches(seed, c.batches);
    auto net = model::create_model(m);
    model::initialize(net, seed, &batches.front());
    // Dropout off (FullDataHessian sets eval mode), the training loss.
    FullDataHessian h(net, std::move(batches), train::LossOptions{c.label_smoothing}, ".*", torch::kCPU);
    const auto gradient = h.gradient().first.clone();
    const auto grads = parameter_views(h, gradient);
    const LinearOperator hvp = [&](const torch::Tensor& v) { return h.hvp(v); };
    // The start vectors of probe --critical-lr's (seed for lambda_1(H), seed + 1 for P^-1 H).
    const double curvature =
        preconditioned(c.optimizer)
            ? first_step_preconditioned_sharpness(h, c.optimizer, gradient, rademacher(h.dim(), seed + 1, h.dtype()),
                                                  c.lanczos_steps)
            : largest_eigenvalue(hvp, rademacher(h.dim(), seed, h.dtype()), c.lanczos_steps).value;
    const auto r = critical_lr(h.params(), grads, c.optimizer, [&] { return h.loss(); }, c.lr_lo, c.lr_hi, c.lr_tol);
    const double ratio = curvature / stability_threshold(c.optimizer, c.lr);
    const double enc = gradient_ratio(h, gradient, "encoder", m.encoder_layers - 1);
    const double dec = gradient_ratio(h, gradient, "decoder", m.decoder_layers - 1);
    lr_cs.push_back(r.lr);
    ratios.push_back(ratio);
    enc_ratios.push_back(enc);
    dec_ratios.push_back(dec);
    seeds.push_back({{"seed", seed}, {"lr_c", r.lr}, {"bracketed", r.bracketed}, {"curvature", curvature},
                     {"threshold_ratio", ratio}, {"grad_ratio_encoder", enc}, {"grad_ratio_decoder", dec}});
    std::cerr << "normlab advise: seed " << seed << ": lr_c " << fmt(r.lr) << ", curvature x lr / threshold "
              << fmt(ratio) << "\n";
  }
  auto a = advise(median(lr_cs), c.lr);
  const double ratio = median(ratios);
  a.evidence.push_back(std::string(preconditioned(c.optimizer) ? "lambda_1(P^-1 H)" : "lambda_1(H)") +
                       " at initialisation is " + fmt(ratio) + " x the stability threshold at the target lr" +
                       (ratio > 1 ? " (above: the first steps are unstable there)" : " (below)"));
  a.evidence.push_back("last/first layer FFN W2 gradient norm: encoder " + fmt(median(enc_ratios)) + ", decoder " +
                       fmt(median(dec_ratios)) + " (Post-LN's grow with depth, Xiong et al. 2020)");
  nlohmann::json j = {
      {"config",
       {{"model", c.model}, {"optimizer", train::to_string(c.optimizer.kind)}, {"betas", c.optimizer.betas},
        {"lr", c.lr}, {"seeds", c.seeds}, {"batches", c.batches}, {"seed", c.seed},
        {"label_smoothing", c.label_smoothing}, {"train", c.inputs.train_prefix}, {"vocab_size", source.vocab_size()},
        {"lanczos_steps", c.lanczos_steps}}},
      {"seeds", seeds},
      {"median_lr_c", a.lr_c},
      {"median_threshold_ratio", ratio},
      {"needs_warmup", a.needs_warmup},
      {"warmup_init_lr", a.warmup_init_lr},
      {"warmup_steps", a.warmup_steps},
      {"evidence", a.evidence}};
  std::filesystem::create_directories(c.out);
  core::write_file_atomic((std::filesystem::path(c.out) / "advise.json").string(), j.dump(2) + "\n");
  std::cout << (a.needs_warmup ? "needs warm-up" : "trains without warm-up") << " at lr " << fmt(c.lr) << "\n";
  if (a.needs_warmup)
    std::cout << "proposed: --warmup-init-lr " << fmt(a.warmup_init_lr) << " --warmup-steps " << a.warmup_steps
              << " (linear from lr_c/2, at most 1% more per update; a heuristic)\n";
  for (const auto& e : a.evidence) std::cout << "  " << e << "\n";
  return j;
}

}  // namespace normlab::analysis
