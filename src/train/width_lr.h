// The per-parameter learning rates of the width parametrisations (--parametrisation, docs/width.md):
// muP's (Yang et al. 2021, Table 3 and Table 8; the `mup` package's MuAdam, MuAdamW and MuSGD in
// mup/optim.py) and u-muP's. A parameter's kind is mup's
// InfShape::ninf(): how many of its dimensions grow with the width (model/width.h). u-muP's
// (--parametrisation u-mup: unit_scaling's optim.Adam / AdamW) come from model/unit_scaling.h.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "train/optimizer.h"

namespace normlab::train {

// What --parametrisation mup cannot take from `optimizer`: optimisers outside mup's tables
// (MuAdam, MuAdamW, MuSGD), one message; u-mup: anything but adam and adamw. Empty under sp.
std::vector<std::string> width_optimizer_problems(const model::ModelConfig& model, const OptimizerConfig& optimizer);

// Each of `named`'s lr multiplier (parallel to it) for a model of `model`: under MuAdam (adam,
// adamw) 1/m for a matrix with two infinite dimensions (hidden weights), else 1; under MuSGD
// (sgd) m for a parameter with one infinite dimension (tables, readouts, biases, norms),
// fan_out_mult / fan_in_mult = 1 for two (normlab's widths grow together), 1 for none. Under
// u-mup model::unit_adam_lr_scale's. All 1 under sp. Throws std::invalid_argument for width_optimizer_problems().
std::vector<double> width_lr_scales(const model::ModelConfig& model, const OptimizerConfig& optimizer,
                                  const NamedTensors& named);

// Each of `named`'s weight-decay multiplier: the inverse of its lr multiplier (mup/optim.py:
// MuAdam's group['weight_decay'] *= width_mult where group['lr'] /= width_mult, MuSGD's /= where
// lr *= ), so that lr x weight decay, AdamW's decoupled decay per update, is sp's for every
// parameter. All 1 under sp.
std::vector<double> width_weight_decay_scales(const model::ModelConfig& model, const OptimizerConfig& optimizer,
                                            const NamedTensors& named);

}  // namespace normlab::train
