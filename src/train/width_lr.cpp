#include "train/width_lr.h"

#include "core/problems.h"
#include "model/unit_scaling.h"
#include "model/width.h"

namespace normlab::train {
namespace {

bool mup(const model::ModelConfig& c) { return c.parametrisation == model::Parametrisation::kMup; }

// mup/optim.py: MuAdam's rule for "Adam-like" optimisers, MuSGD's for SGD.
bool adam_like(OptimizerKind kind) { return kind == OptimizerKind::kAdam || kind == OptimizerKind::kAdamW; }

}  // namespace

std::vector<std::string> width_optimizer_problems(const model::ModelConfig& model, const OptimizerConfig& optimizer) {
  std::vector<std::string> out;
  if (model::unit_scaled(model) && !adam_like(optimizer.kind))
    out.push_back("--parametrisation u-mup: --optimizer " + to_string(optimizer.kind) +
                  " has no u-muP rule here (unit_scaling's Adam and AdamW give adam and adamw; its SGD rule needs "
                  "the package's unit-scaled gradients, which normlab does not compute: docs/width.md)");
  if (!mup(model)) return out;
  if (!adam_like(optimizer.kind) && optimizer.kind != OptimizerKind::kSgd)
    out.push_back("--parametrisation mup: --optimizer " + to_string(optimizer.kind) +
                  " has no muP rule here (mup's MuAdam, MuAdamW and MuSGD give adam, adamw and sgd)");
  return out;
}

std::vector<double> width_lr_scales(const model::ModelConfig& model, const OptimizerConfig& optimizer,
                                  const NamedTensors& named) {
  std::vector<double> scales(named.size(), 1.0);
  if (model::unit_scaled(model)) {
    core::throw_if_problems(width_optimizer_problems(model, optimizer));
    for (size_t i = 0; i < named.size(); ++i)
      scales[i] = model::unit_adam_lr_scale(model, named[i].first, named[i].second.sizes().vec());
    return scales;
  }
  if (!mup(model)) return scales;
  core::throw_if_problems(width_optimizer_problems(model, optimizer));
  const auto base = model::base_shapes(model);
  const double m = model::width_mult(model);
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& [name, p] = named[i];
    const int infinite = model::infinite_dims(p.sizes().vec(), base.at(name));
    if (adam_like(optimizer.kind))
      scales[i] = infinite == 2 ? 1.0 / m : 1.0;  // MuAdam: lr / width_mult for matrix-like
    else
      scales[i] = infinite == 1 ? m : 1.0;  // MuSGD: lr * width_mult for vector-like
  }
  return scales;
}

std::vector<double> width_weight_decay_scales(const model::ModelConfig& model, const OptimizerConfig& optimizer,
                                            const NamedTensors& named) {
  auto scales = width_lr_scales(model, optimizer, named);
  for (auto& s : scales) s = 1.0 / s;
  return scales;
}

}  // namespace normlab::train
