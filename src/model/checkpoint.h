// Model checkpoints and tensor files, readable by Python's torch.load (docs/conventions.md).
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "model/model.h"

namespace normlab::model {

using TensorMap = std::map<std::string, torch::Tensor>;

// Extra tensor under which `normlab train` stores the run's SentencePiece model (its bytes).
inline constexpr const char* kVocabTensor = "vocab/spm.model";

// Bytes <-> a uint8 tensor (vocabularies and metadata inside checkpoints).
torch::Tensor bytes_tensor(const std::string& bytes);
std::string tensor_bytes(const torch::Tensor& t);

// A dict name -> tensor as a PyTorch archive, written atomically (temporary file + rename).
void save_tensors(const std::string& path, const TensorMap& tensors);
// Throws std::runtime_error naming `path` when it is missing, truncated or not such a dict.
TensorMap load_tensors(const std::string& path);

// The model's parameters by stored name (shared tables once), on the CPU.
TensorMap named_parameters(const Model& model);

// Parameters plus metadata {"format": "normlab-checkpoint", "version": 2, "model": config,
// "checksum": ..., ...extra}, plus `extra_tensors` (optimiser state, RNG states) under their own
// names. The checksum covers every tensor and the rest of the metadata and is checked on load
// (version-1 files: the tensors only, said on stderr). Atomic.
void save_model(const std::string& path, const Model& model, const nlohmann::json& extra = {},
                const TensorMap& extra_tensors = {});

struct LoadedModel {
  Model model{nullptr};
  nlohmann::json meta;
  TensorMap extra_tensors;
};
// Rebuilds the model, of its stored kind (model.h's registry), from its stored configuration and loads every parameter, in the dtype it
// was saved in. Throws std::runtime_error naming the file for foreign, truncated, corrupted
// or inconsistent checkpoints.
LoadedModel load_model(const std::string& path);

}  // namespace normlab::model
