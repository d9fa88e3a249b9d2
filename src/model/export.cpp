#include "model/export.h"

#include <filesystem>

#include "core/file_io.h"
#include "model/checkpoint.h"

namespace normlab::model {

nlohmann::json weights_manifest(const Model& model) {
  nlohmann::json manifest = model->manifest();
  manifest.update({{"format", "normlab-weights"},
                   {"version", 1},
                   {"model", nlohmann::json(model->config())},
                   {"tied", model->tied_aliases()}});
  return manifest;
}

void export_weights(const Model& model, const std::string& pt_path, const nlohmann::json& extra) {
  auto tensors = named_parameters(model);
  for (const auto& [alias, stored] : model->tied_aliases()) tensors[alias] = tensors.at(stored);
  auto manifest = weights_manifest(model);
  manifest.update(extra);
  const auto json_path = std::filesystem::path(pt_path).replace_extension(".json").string();
  save_tensors(pt_path, tensors);
  core::write_file_atomic(json_path, manifest.dump(2) + "\n");
}

}  // namespace normlab::model
