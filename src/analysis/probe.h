// `normlab probe`: gradients and hidden-state norms at initialisation (Xiong et al. 2020,
// §3.3, Fig. 3, Lemmas 2-3, Theorem 1; docs/probe.md).
//
// OUT/probe.json         resolved configuration and a per-scheme summary
// OUT/grad_norms.csv     scheme,stack,layer,param,expected_grad_norm_mean,expected_grad_norm_std,
//                        mean_grad_norm_mean,mean_grad_norm_std
// OUT/hidden_norms.csv   scheme,stack,layer,quantity,value_mean,value_std,lemma_value,
//                        lemma_lower,lemma_upper
// OUT/ln_jacobian.csv    scheme,stack,layer,ln,input_norm,jacobian_norm,sqrt_d_over_norm
// with --sweep instead:
// OUT/sweep.csv          scheme,layers,d_model,seed,grad_norm
// OUT/sweep.json         {"scheme": {"slope_layers", "slope_d", "theory_slope_layers", ...}}
// with --critical-lr instead (docs/curvature.md):
// OUT/critical_lr.csv    scheme,seed,optimizer,lr_c,bracketed,curvature,curvature_bound
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/inputs.h"
#include "core/process_group.h"
#include "model/config.h"
#include "model/precision.h"

namespace normlab::analysis {

struct ProbeConfig {
  std::vector<std::string> schemes{"post-ln", "pre-ln"};  // the papers' scheme names
  model::SchemeOverrides overrides;  // the explicit scheme flags, applied to every scheme
  model::ModelConfig model;   // sizes and dropout; vocabulary sizes come from the inputs
  InputConfig inputs;         // real batches (--train) or random tokens
  // Xiong §3.3's setting: the encoder stack alone as a sequence predictor, one head,
  // F = C, W^Q = W^K = 0, Xavier-normal weights, Gaussian inputs x_0 ~ N(0, I), no dropout,
  // loss -log softmax(W^emb x) against random targets.
  bool analysis_setting = false;
  // --analysis-stack: which stack the analysis setting runs. Empty: an encoder-decoder's (or an
  // encoder-only model's) encoder, a decoder-only model's decoder. "decoder" with an
  // encoder-decoder: the encoder on x_0, then the decoder, causal, on Gaussian inputs y_0 of its
  // own, its cross-attention (W^Q = W^K = 0 too) reading the encoder's output; the loss is read
  // out of the decoder.
  std::string analysis_stack;
  bool cross_attention_analysis() const;  // the decoder of an encoder-decoder, as above
  int64_t seeds = 10;         // fresh initialisations seed, seed+1, ...
  int64_t batches = 10;       // mini-batches per initialisation
  uint64_t seed = 1;
  bool dropout = true;        // training-mode forward (as in training); false: eval mode
  double label_smoothing = 0.1;
  model::Precision precision = model::Precision::kFp32;  // of the forward and backward (precision.h)
  int64_t power_iterations = 20;  // LayerNorm Jacobian norm
  int64_t jacobian_tokens = 256;  // tokens of the first batch used for it, per LayerNorm
  std::string out;
  // --sweep: Theorem 1, always in the analysis setting.
  bool sweep = false;
  std::vector<int64_t> sweep_layers{1, 2, 4, 8, 16};  // at d = model.d_model
  std::vector<int64_t> sweep_d{64, 128, 256, 512};    // at L = model.encoder_layers
  // --critical-lr: the critical learning rate of SGD and Adam at initialisation, by bisection
  // in [lo, hi] to a relative `tol`, beside the curvature bounds (Lanczos, `lanczos_steps`).
  bool critical_lr = false;
  double critical_lr_lo = 1e-6, critical_lr_hi = 1e3, critical_lr_tol = 0.01;
  int64_t lanczos_steps = 20;

  std::vector<std::string> problems() const;  // every problem, naming the option

 private:
  std::vector<std::string> scheme_problems() const;       // --schemes with the overrides
  std::vector<std::string> sweep_problems() const;        // --sweep's depths and widths
  std::vector<std::string> critical_lr_problems() const;  // --critical-lr's options
  std::vector<std::string> analysis_stack_problems() const;  // --analysis-stack against the model kind
};

// Runs the probe (or the sweep, or --critical-lr) and writes the files above; a summary goes to
// stderr. Under a launcher the seeds are split across the ranks of `group` (each seed's work on
// one rank, the results gathered in seed order: the files equal one process's) and rank 0
// alone writes OUT (docs/distributed.md).
void run_probe(const ProbeConfig& config, core::ProcessGroup& group);
void run_probe(const ProbeConfig& config);  // one process

// Least-squares slope of log(y) against log(x).
double log_log_slope(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace normlab::analysis
