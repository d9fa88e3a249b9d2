// `normlab export`: weights for other tools (docs/conventions.md, "Files").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace normlab::model {

// Everything another implementation needs to reproduce the forward pass: configuration,
// tied names, and the kind's own (ModelImpl::manifest(): the encoder-decoder's scheme constants,
// special tokens, position offset, embedding scale, LayerNorm eps).
nlohmann::json weights_manifest(const Model& model);

// Writes `pt_path` (dict fairseq name -> tensor, aliases of shared tables included) and the
// manifest, merged with `extra`, to the same path with the extension .json. Atomic.
void export_weights(const Model& model, const std::string& pt_path, const nlohmann::json& extra);

}  // namespace normlab::model
