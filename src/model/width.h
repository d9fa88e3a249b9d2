// muP's width rules (Yang et al. 2021, "Tensor Programs V", arXiv 2203.03466, Table 3 and its
// equivalent form Table 8, as the `mup` package 1.0.0 implements them: mup/shape.py, layer.py,
// init.py, optim.py), docs/width.md. A mup model at its base width C0 is the sp model; under sp
// every value here is what the model had before muP existed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"

namespace normlab::model {

// The width multiplier m = C / C0 under mup (mup's InfShape::width_mult()); 1 under sp.
double width_mult(const ModelConfig& c);
// The base model of a mup model: d_model C0, ffn_dim F C0 / C, every other setting c's, sp.
ModelConfig base_config(const ModelConfig& c);

// The factor on q.k (model/attention.h): 1/sqrt(D) under sp; sqrt(D0)/D under mup, D0 = C0/H, the
// 1/d attention of Yang et al. §J.1 ("attention logit scaled by 1/d"; microsoft/mup README: "8/d
// instead of 1/sqrt(d) ... backward compatible with 1/sqrt(d) when d=64", i.e. sqrt(D0)/D); alpha/D
// under u-mup (U.scaled_dot_product_attention's scale mult / d_head, mult alpha_attn-softmax,
// model/unit_scaling.h).
double attention_scale(const ModelConfig& c);
// The token embedding's multiplier: sqrt(C) (fairseq) or 1 (--no-scale-embedding, GPT-2, BERT);
// under mup sqrt(C0): a table has one infinite dimension, so its multiplier, like its init, is the
// base model's (mup/init.py: a vector-like parameter's init does not depend on width).
double embedding_scale(const ModelConfig& c);
// The readout's input multiplier, 1/m under mup (MuReadout.forward: output_mult * x / width_mult,
// output_mult 1; MuSharedReadout for a table tied to the output), alpha/C under u-mup
// (U.linear_readout's 1/fan_in times U.cross_entropy's mult alpha_loss-softmax), 1 under sp.
double readout_multiplier(const ModelConfig& c);

// Each parameter's shape in the base model, by name (what mup's set_base_shapes zips with the
// model's shapes). Builds the base model without drawing from torch's generator. Needs mup.
std::map<std::string, std::vector<int64_t>> base_shapes(const ModelConfig& c);
// mup's InfShape::ninf(): the dimensions of `shape` whose size differs from `base`'s.
int infinite_dims(const std::vector<int64_t>& shape, const std::vector<int64_t>& base);

// Why `what` (an instrument that steps every parameter at one lr: curvature thresholds, the
// critical lr, an Adam-step perturbation, --warmup auto) cannot run on `c`: muP's per-parameter
// lr (docs/width.md); nullopt under sp.
std::optional<std::string> one_rate_problem(const ModelConfig& c, const std::string& what);

}  // namespace normlab::model
