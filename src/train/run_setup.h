// The set-up phases of `normlab train` before its first update (docs/architecture.md): the
// model a run starts from (--init-from, a resumed checkpoint, or a new one) and its vocabulary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/checkpoint.h"
#include "model/model.h"
#include "train/position.h"
#include "train/run_dir.h"
#include "train/train_config.h"
#include "train/train_data.h"

namespace normlab::core {
class ProcessGroup;
}

namespace normlab::train {

// The checkpoint file --init-from names: the file itself, or with --init-from-update U the folder's
// checkpoint_<E>_<U>.pt (checkpoint_names.h's update_checkpoint_path).
std::string init_from_file(const InitFromConfig& init_from);
// --init-from: the trained model (its vocabulary too); `c.model` becomes the grown model's
// configuration (with --num-classes a classifier's). Nothing without --init-from.
std::optional<model::LoadedModel> load_init_from(TrainConfig& c);

// The position of a resumed run; throws std::invalid_argument when RUN_DIR holds a different
// experiment than `config_json`.
Position resume_position(const model::LoadedModel& resumed, const nlohmann::json& config_json, const std::string& out);

// The SentencePiece model's bytes: the resumed checkpoint's, --init-from's (written into
// RUN_DIR/vocab), or RUN_DIR/vocab's, trained on the training text by rank 0 when missing.
std::string run_vocab(const TrainConfig& c, RunDir& dir, const model::LoadedModel* resumed,
                      const model::LoadedModel* base, core::ProcessGroup& group);

// A new run's model: --init-from's with layers added (its event recorded), or a fresh one of
// `model_config`'s kind initialised on the first training batch (Admin's profile).
model::Model new_model(const TrainConfig& c, const model::ModelConfig& model_config,
                       const model::LoadedModel* base, const Corpus& train, RunDir& dir);

// What every rank of a data-parallel job must agree on (core::check_same_job): the
// configuration, the data's and vocabulary's fingerprints, the update it resumes at (-1: none).
nlohmann::json job_fingerprint(const nlohmann::json& config_json, const Corpus& train, const Corpus& valid,
                               const std::string& vocab_bytes, int64_t resume_update);

// The lr multiplier of each of `named`, parameters of `model`: --pretrained-lr-scale's (1 for the
// added layers' parameters) times muP's (train/width_lr.h; 1 under sp).
std::vector<double> parameter_lr_scales(const TrainConfig& c, const model::ModelConfig& model,
                                        const NamedTensors& named);

}  // namespace normlab::train
