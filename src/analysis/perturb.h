// `normlab perturb`: how much the output moves when every weight matrix moves a little, against
// depth (Liu et al. 2020, "output change"; the tutorial's Fig. 5; docs/probe.md, "Perturb").
//
// OUT/perturb.csv   scheme,depth,seed,delta,encoder_change,decoder_change
// OUT/perturb.json  resolved configuration, mean and std over seeds per scheme and depth
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/inputs.h"
#include "model/config.h"
#include "model/model.h"

namespace normlab::analysis {

enum class DeltaKind {
  kSign,  // W* = W - scale * sign(N(0,1)), elementwise (REFERENCE §1, Admin)
  kAdam,  // W* = W after one Adam step at --lr on the first batch's gradient
};
std::string to_string(DeltaKind k);
DeltaKind parse_delta_kind(const std::string& s, const std::string& option = "--delta");

struct PerturbConfig {
  std::vector<std::string> schemes{"post-ln", "pre-ln"};
  model::SchemeOverrides overrides;           // the explicit scheme flags, applied to every scheme
  std::vector<int64_t> depths{2, 6, 12, 18};  // encoder = decoder layers
  model::ModelConfig model;                   // sizes; layers and scheme set per point
  InputConfig inputs;
  DeltaKind delta = DeltaKind::kSign;
  double scale = 1e-4;        // kSign
  double lr = 5e-4;           // kAdam
  double label_smoothing = 0.1;  // kAdam's loss
  int64_t seeds = 3;
  int64_t batches = 1;        // outputs compared on these batches
  uint64_t seed = 1;
  std::string out;

  std::vector<std::string> problems() const;
};

// Every 2-D parameter (weight matrices and embedding tables; not biases, LayerNorm, omega,
// alpha) is perturbed; the change is ||F(x,W) - F(x,W*)||_2^2 per non-padding token, averaged,
// for each stack's output as fairseq's module returns it: an encoder-decoder's encoder states
// (B,S,C) and decoder logits (B,T,V), a single-stack model's logits in its stack's column (the
// other column NaN, an empty CSV field); dropout off. Any model kind (config.model.kind).
void run_perturb(const PerturbConfig& config);

// W -> W* in place, for every 2-D parameter of `net` (in the mode the caller set): kSign with
// signs drawn from `seed`; kAdam with one Adam step at config.lr on the gradient of the mean
// label-smoothed loss of `first` (tests/analysis/perturb_test.cpp checks it by hand).
void perturb_weights(model::Model net, const PerturbConfig& config, const data::Batch& first, uint64_t seed);

}  // namespace normlab::analysis
