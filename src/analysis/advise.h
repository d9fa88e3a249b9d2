// `normlab advise` (issue 17 §5; docs/curvature.md, "Does this configuration need warm-up?"):
// measures at initialisation what decides whether a configuration trains without warm-up at
// its target learning rate, and predicts it.
//   OUT/advise.json  the configuration, per seed {lr_c, bracketed, curvature, threshold_ratio,
//                    grad_ratio_encoder, grad_ratio_decoder}, their medians, the prediction and
//                    the evidence lines
// Measured on the probe batches with dropout off and the training loss, for the optimiser
// given: lr_c, the smallest lr whose first step raises the loss (Kalra & Barkeshli 2024);
// the curvature that bounds a stable step (lambda_1(P^-1 H) for the Adam family with P of the
// first step, lambda_1(H) for SGD) over the stability threshold at the target lr; the last
// over the first layer's FFN W2 gradient norm.
// The rule: needs warm-up iff the target lr exceeds the median lr_c. Proposed then: the
// trainer's linear warm-up from lr_c / 2, the rate growing at most 1% per update, i.e.
// W = (lr - lr_c/2) / (0.01 lr_c/2) updates (a heuristic; only the needs/does-not prediction is
// checked against training runs, docs/results.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/inputs.h"
#include "model/config.h"
#include "train/optimizer.h"

namespace normlab::analysis {

struct AdviseConfig {
  model::ModelConfig model;            // vocabulary sizes come from the inputs
  InputConfig inputs;                  // real batches (--train) or random tokens
  train::OptimizerConfig optimizer;    // the run's optimiser (fresh state)
  double lr = 0.0;                     // the target (peak) learning rate
  int64_t seeds = 3;                   // fresh initialisations seed, seed+1, ...
  int64_t batches = 2;                 // probe batches per initialisation
  uint64_t seed = 1;
  double label_smoothing = 0.1;
  int64_t lanczos_steps = 20;          // for the curvature
  double lr_lo = 1e-6, lr_hi = 1e3, lr_tol = 0.01;  // critical_lr's bracket and tolerance (probe's)
  std::string out;

  std::vector<std::string> problems() const;  // every problem, naming the option
};

struct Advice {
  bool needs_warmup = false;
  double lr_c = 0.0;                   // median over seeds
  double warmup_init_lr = 0.0;         // proposed start (0 when no warm-up is needed)
  int64_t warmup_steps = 0;            // proposed length
  std::vector<std::string> evidence;   // one line each
};

// The rule and the proposal from the median critical lr and the target lr.
Advice advise(double lr_c, double lr);

// Measures, decides, writes OUT/advise.json and prints the advice on stdout; returns the JSON.
nlohmann::json run_advise(const AdviseConfig& config);

}  // namespace normlab::analysis
