#include "model/export.h"

#include <cmath>
#include <filesystem>

#include "core/file_io.h"
#include "core/tokens.h"
#include "model/checkpoint.h"
#include "model/norm.h"
#include "model/scheme_constants.h"

namespace normlab::model {

nlohmann::json weights_manifest(const Seq2Seq& model) {
  const auto& c = model->config();
  const bool deepnorm = c.scheme.residual == ResidualForm::kDeepNorm;
  nlohmann::json model_json = c;
  return {
      {"format", "normlab-weights"},
      {"version", 1},
      {"model", model_json},
      {"scheme",
       {{"norm", to_string(c.scheme.norm)},
        {"residual", to_string(c.scheme.residual)},
        {"init", to_string(c.scheme.init)},
        {"norm_kind", to_string(c.scheme.norm_kind)},
        {"mix_ln_alpha", c.scheme.mix_alpha},
        {"ln_scaling", c.scheme.ln_scaling},
        {"qk_norm", c.scheme.qk_norm},
        {"dyt_alpha_init", kDyTAlphaInit},
        {"encoder_alpha", deepnorm ? deepnorm_encoder_alpha(c.encoder_layers, c.decoder_layers) : 1.0},
        {"decoder_alpha", deepnorm ? deepnorm_decoder_alpha(c.decoder_layers) : 1.0}}},
      {"special_tokens", {{"bos", kBos}, {"pad", kPad}, {"eos", kEos}, {"unk", kUnk}}},
      {"source_append_eos", true},
      {"decoder_start_token", kEos},
      {"position_offset", kPositionOffset},
      {"embed_scale", std::sqrt(static_cast<double>(c.d_model))},
      {"layer_norm_eps", kNormEps},  // LayerNorm and RMSNorm
      {"tied", model->tied_aliases()},
  };
}

void export_weights(const Seq2Seq& model, const std::string& pt_path, const nlohmann::json& extra) {
  auto tensors = named_parameters(model);
  for (const auto& [alias, stored] : model->tied_aliases()) tensors[alias] = tensors.at(stored);
  auto manifest = weights_manifest(model);
  manifest.update(extra);
  const auto json_path = std::filesystem::path(pt_path).replace_extension(".json").string();
  save_tensors(pt_path, tensors);
  core::write_file_atomic(json_path, manifest.dump(2) + "\n");
}

}  // namespace normlab::model
