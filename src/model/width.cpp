#include "model/width.h"

#include <cmath>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "model/model.h"

namespace normlab::model {
namespace {

bool mup(const ModelConfig& c) { return c.parametrisation == Parametrisation::kMup; }

}  // namespace

double width_mult(const ModelConfig& c) {
  return mup(c) ? static_cast<double>(c.d_model) / static_cast<double>(c.mup_base_width) : 1.0;
}

ModelConfig base_config(const ModelConfig& c) {
  if (!mup(c)) throw std::invalid_argument("base_config: the model is not --parametrisation mup");
  auto base = c;
  base.d_model = c.mup_base_width;
  base.ffn_dim = c.ffn_dim * c.mup_base_width / c.d_model;  // whole: ModelConfig::problems()
  base.parametrisation = Parametrisation::kSp;
  base.mup_base_width = 0;
  return base;
}

double attention_scale(const ModelConfig& c) {
  const int64_t D = c.d_model / c.heads;
  if (c.parametrisation == Parametrisation::kUmup)
    return c.umup.attn_softmax / static_cast<double>(D);  // U.sdpa: mult / d_head
  const double sp = 1.0 / std::sqrt(static_cast<double>(D));
  if (!mup(c)) return sp;
  const int64_t D0 = c.mup_base_width / c.heads;
  return sp * std::sqrt(static_cast<double>(D0) / static_cast<double>(D));  // sqrt(D0) / D
}

double embedding_scale(const ModelConfig& c) {
  if (!c.scale_embedding) return 1.0;
  return std::sqrt(static_cast<double>(mup(c) ? c.mup_base_width : c.d_model));
}

double readout_multiplier(const ModelConfig& c) {
  if (c.parametrisation == Parametrisation::kUmup)  // U.linear_readout's 1/fan_in, U.cross_entropy's mult
    return c.umup.loss_softmax / static_cast<double>(c.d_model);
  return 1.0 / width_mult(c);
}

std::map<std::string, std::vector<int64_t>> base_shapes(const ModelConfig& c) {
  // The layers' constructors draw their default init: keep the generator where it was, so that
  // asking for the shapes changes no random number of the run.
  auto generator = at::detail::getDefaultCPUGenerator();
  const auto state = generator.get_state();
  Model base = create_model(base_config(c));
  generator.set_state(state);
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& p : base->named_parameters()) out[p.key()] = p.value().sizes().vec();
  return out;
}

int infinite_dims(const std::vector<int64_t>& shape, const std::vector<int64_t>& base) {
  if (shape.size() != base.size()) throw std::logic_error("infinite_dims: shapes of different ranks");
  int n = 0;
  for (size_t i = 0; i < shape.size(); ++i) n += shape[i] != base[i];
  return n;
}

std::optional<std::string> one_rate_problem(const ModelConfig& c, const std::string& what) {
  if (c.parametrisation == Parametrisation::kSp) return std::nullopt;
  return what + " measures one lr for every parameter: not with --parametrisation " + to_string(c.parametrisation) +
         "'s per-parameter lr (docs/width.md)";
}

}  // namespace normlab::model
