// `normlab export`: weights for other tools (docs/conventions.md, "Files").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "model/seq2seq.h"

namespace normlab::model {

// Everything another implementation needs to reproduce the forward pass: configuration,
// scheme constants, special tokens, position offset, embedding scale, LayerNorm eps, tied names.
nlohmann::json weights_manifest(const Seq2Seq& model);

// Writes `pt_path` (dict fairseq name -> tensor, aliases of shared tables included) and the
// manifest, merged with `extra`, to the same path with the extension .json. Atomic.
void export_weights(const Seq2Seq& model, const std::string& pt_path, const nlohmann::json& extra);

}  // namespace normlab::model
