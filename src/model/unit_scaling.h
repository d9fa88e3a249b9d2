// u-muP (Blake et al. 2024, "u-muP: The Unit-Scaled Maximal Update Parametrization", arXiv
// 2407.17465), as Graphcore's `unit-scaling` package 0.3.5 implements it (unit_scaling/functional.py,
// _modules.py, optim.py; docs/width.md, "u-muP"). Every weight is drawn with unit variance and the
// forward pass carries the multipliers instead: each function below is one of the package's forward
// scales, which the model applies where unit_scaled() holds.
//
// The package also scales the backward pass apart from the forward (scale_bwd); all of those
// factors are per tensor (a constant times the true gradient of each parameter: docs/width.md shows
// why), which Adam, AdamW (up to eps) and sign or orthogonalised updates do not see. normlab keeps
// the true gradient, so it offers u-muP with Adam and AdamW only (SGD's rule needs the package's
// gradient scales).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace normlab::model {

bool unit_scaled(const ModelConfig& c);

// U.linear's output scale 1/sqrt(fan_in) (scale_power 0.5) on x W^T + b (the bias too).
double unit_linear_scale(int64_t fan_in);

// U.gelu(x, mult)'s output scale: the logarithmic interpolation at alpha = 1/(1 + 0.25/mult^2)
// between 2 and sqrt(2 / (1 - 1/pi)) (the package's empirical model of 1/std(gelu(mult x)/mult),
// x ~ N(0, 1)). The function is that scale times gelu(mult x) / mult (mult: alpha_ffn-act).
double unit_gelu_scale(double mult);

// U.scaled_dot_product_attention(mult)'s output scale for `keys` key positions of heads of
// dimension `head_dim`: 1 / interp(alpha = 1/(1 + 4 D / mult^2), lower = sqrt((causal ? ln S : 1) / S),
// upper 1). Its softmax takes q.k x mult / D (model/width.h's attention_scale; mult:
// alpha_attn-softmax).
double unit_attention_output_scale(int64_t head_dim, int64_t keys, bool causal, double mult);

// The residual branch weight tau of block `index` (0-based over the stack's attention and FFN blocks,
// `blocks` = 2L of them) under transformer_residual_scaling_rule(alpha_res, alpha_res-attn-ratio)
// (u-muP's Appendix G): with a_ffn = alpha_res sqrt(2 / (1 + ratio^2)), a_attn = ratio a_ffn,
// tau = a / sqrt(L + n_attn a_attn^2 + n_ffn a_ffn^2) over the n_attn, n_ffn blocks before this one
// (1/sqrt(L + index) at the defaults). The block returns x / sqrt(1 + tau^2) + f(N(x)) tau /
// sqrt(1 + tau^2) (U.residual_split/add).
double unit_residual_tau(int64_t index, int64_t blocks, const UmupAlphas& alphas);

// The alphas of UmupAlphas, one row each: its option (--umup-alpha-NAME), its key in config.json's
// `umup_alphas`, the member, and what it multiplies (the option's help). The one list that the
// command line, the config file and the checks walk.
struct UmupAlphaField {
  const char* option;
  const char* key;
  double UmupAlphas::*member;
  const char* help;
};
const std::vector<UmupAlphaField>& umup_alpha_fields();

// The token and position tables' sum is U.add's: (E[t] + P[t]) x 2^-1/2.
inline constexpr double kUnitSumScale = 0.70710678118654752440;

// What a model of `c` needs for u-muP here: the package's decoder (Pre-LN, LayerNorm or RMSNorm,
// causal, untied readout) with normlab's learned positions and biases; no dropout; alphas > 0 (and
// none but u-mup's); one message each.
std::vector<std::string> unit_scaling_problems(const ModelConfig& c);

// Each parameter's Adam lr multiplier (unit_scaling/optim.py lr_scale_func_adam): a matrix or table
// fan_in^-1/2 (fan_in = its second dimension: a table's width), the readout 1, a norm or bias 1;
// times L^-1/2 inside the stack's L layers (lr_scale_for_depth, DepthSequential). `name` a
// parameter name of the model, `shape` its sizes.
double unit_adam_lr_scale(const ModelConfig& c, const std::string& name, const std::vector<int64_t>& shape);

}  // namespace normlab::model
