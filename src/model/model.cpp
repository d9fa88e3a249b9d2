// The model interface's shared parts and the registry of kinds: the built-in kinds one line
// each, then those registered later (register_model_kind).
#include "model/model.h"

#include <cmath>
#include <deque>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/tokens.h"
#include "model/decoder_only.h"
#include "model/encoder_only.h"
#include "model/scheme_constants.h"
#include "model/seq2seq.h"
#include "model/width.h"

namespace normlab::model {
namespace {

const ModelConfig& validated(const ModelConfig& c) {
  c.validate();
  return c;
}

struct KindEntry {
  std::string name;
  ModelFactory make;
};

std::deque<KindEntry>& registry() {
  static std::deque<KindEntry> entries{
      {kEncoderDecoder, [](const ModelConfig& c) { return Model(Seq2Seq(c)); }},
      {kDecoderOnly, [](const ModelConfig& c) { return Model(DecoderOnly(c)); }},
      {kEncoderOnly, [](const ModelConfig& c) { return Model(EncoderOnly(c)); }},
  };
  return entries;
}

const KindEntry* find(const std::string& name) {
  for (const auto& e : registry())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

ModelImpl::ModelImpl(const ModelConfig& config) : config_(validated(config)) {}

c10::Device ModelImpl::device() const {
  const auto params = parameters();
  return params.empty() ? c10::Device(c10::kCPU) : params.front().device();
}

nlohmann::json ModelImpl::common_manifest() const {
  const auto& s = config_.scheme;
  nlohmann::json scheme = {{"norm", to_string(s.norm)},
                           {"residual", to_string(s.residual)},
                           {"init", to_string(s.init)},
                           {"norm_kind", to_string(s.norm_kind)},
                           {"mix_ln_alpha", s.mix_alpha},
                           {"ln_scaling", s.ln_scaling},
                           {"qk_norm", s.qk_norm},
                           {"dyt_alpha_init", kDyTAlphaInit}};
  if (config_.has_encoder()) scheme["encoder_alpha"] = stack_constants(config_, /*decoder=*/false).deepnorm_alpha;
  if (config_.has_decoder()) scheme["decoder_alpha"] = stack_constants(config_, /*decoder=*/true).deepnorm_alpha;
  nlohmann::json out = {{"scheme", std::move(scheme)},
                        {"special_tokens", {{"bos", kBos}, {"pad", kPad}, {"eos", kEos}, {"unk", kUnk}}},
                        {"position_offset", kPositionOffset},
                        {"embed_scale", embedding_scale(config_)},
                        {"layer_norm_eps", kNormEps}};
  // muP's two forward multipliers (model/width.h), for a reader of the exported weights; an sp
  // model's are 1/sqrt(D) and 1, as every export before muP said nothing of them.
  if (config_.parametrisation != Parametrisation::kSp) {
    out["attention_scale"] = attention_scale(config_);
    out["readout_multiplier"] = readout_multiplier(config_);
  }
  return out;
}

std::map<std::string, torch::Tensor> ModelImpl::stack_outputs(const data::Batch& batch) {
  return {{stacks().front().name, forward(batch)}};
}

PrecisionGuard ModelImpl::precision_guard() const { return PrecisionGuard(precision_, device()); }

void register_model_kind(const std::string& kind, ModelFactory factory) {
  if (kind.empty() || find(kind))
    throw std::invalid_argument("register_model_kind: the name '" + kind + "' is empty or taken (" +
                                model_kind_choices() + ")");
  registry().push_back({kind, std::move(factory)});
}

std::vector<std::string> model_kinds() {
  std::vector<std::string> out;
  for (const auto& e : registry()) out.push_back(e.name);
  return out;
}

std::string model_kind_choices() {
  std::string out;
  for (const auto& e : registry()) out += (out.empty() ? "" : "|") + e.name;
  return out;
}

Model create_model(const ModelConfig& config) {
  const auto* entry = find(config.kind);
  if (!entry)
    throw std::invalid_argument("model kind '" + config.kind + "' is unknown, expected " + model_kind_choices());
  return entry->make(config);
}

void initialize(Model model, uint64_t seed, const data::Batch* profile) {
  torch::manual_seed(seed);
  model->init_parameters(profile);
}

}  // namespace normlab::model
