// A training run's folder (docs/training.md), one writer per folder: rank 0 of a job holds its
// lock and writes; every rank reads it.
//
// RUN_DIR/config.json      the fully resolved configuration
// RUN_DIR/vocab/spm.model  the joint SentencePiece vocabulary (trained once)
// RUN_DIR/metrics.jsonl    one JSON object per logged update, per validation, per event
// RUN_DIR/train.log        the progress lines also printed on stderr
// RUN_DIR/checkpoints/     checkpoint_last.pt, checkpoint_best.pt, checkpoint<epoch>.pt,
//                          checkpoint_<epoch>_<update>.pt
#pragma once

#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dir_lock.h"
#include "model/checkpoint.h"

namespace normlab::train {

// Keeps the records of the JSON-lines file that `keep` accepts, dropping every line that is not
// a JSON object (a line cut by a kill). Atomic; nothing when the file does not exist. What a
// resumed run does to metrics.jsonl (RunDir::cut_records) and to curvature.jsonl.
void keep_records(const std::filesystem::path& file, const std::function<bool(const nlohmann::json&)>& keep);

class RunDir {
 public:
  // `writes`: this process writes the folder (takes its lock, makes it); the others only read.
  RunDir(const std::string& dir, bool writes);
  bool writes() const { return writes_; }
  const std::filesystem::path& path() const { return dir_; }
  std::filesystem::path checkpoints() const { return dir_ / "checkpoints"; }

  // A progress line, to stderr and train.log.
  void line(const std::string& text);
  // A record, appended to metrics.jsonl. The file is opened per record: a resume replaces it
  // (cut_records renames a new file over it), and an open stream would write into the old one.
  void record(const nlohmann::json& j);
  // Drops the records that a run resumed at `update`, `epoch` will write again: those of later
  // updates, and end-of-epoch validations of `epoch` or later (a run killed after its last
  // checkpoint logged them; a mid-epoch one, at a --max-steps stop, is kept when its update is).
  // update -1: none is kept (a new run). Atomic; nothing for a reader (writes() false).
  void cut_records(int64_t update, int64_t epoch) const;
  void write_config(const nlohmann::json& config) const;

  // The newest intact checkpoint that holds a position (last, then the others by modification
  // time); with `before_update` >= 0, the newest whose position is an earlier update.
  std::optional<model::LoadedModel> newest_checkpoint(int64_t before_update = -1);
  // Whether metrics.jsonl holds a validation record of `update`.
  bool validated(int64_t update) const;
  // Writes the checkpoint under each of `names` (rank 0 only; the others do nothing).
  void save(const std::vector<std::string>& names, const model::Model& net, const nlohmann::json& meta,
            const model::TensorMap& extra) const;
  // Keeps the `keep` newest numbered checkpoints that training wrote (0: all).
  void prune(int64_t keep) const;

 private:
  std::filesystem::path dir_;
  bool writes_;
  std::optional<core::DirLock> lock_;
  std::ofstream log_;
};

}  // namespace normlab::train
