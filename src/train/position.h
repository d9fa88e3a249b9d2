// Where a training run is (Marian's TrainingState): saved in every checkpoint so that a resumed
// run continues exactly.
#pragma once

#include <cstdint>
#include <limits>

#include <nlohmann/json_fwd.hpp>

namespace normlab::train {

struct Position {
  int64_t update = 0;          // optimiser steps done
  int64_t epoch = 1;           // current epoch (1-based)
  int64_t next_batch = 0;      // index of the next batch of this epoch's order
  double best_valid_loss = std::numeric_limits<double>::infinity();
  double best_valid_bleu = -1;  // -1: none yet (--eval-bleu)
  double wall_s = 0.0;         // training time of earlier runs of this RUN_DIR

  // The last finished epoch (the current one while it has not begun).
  int64_t completed_epoch() const { return epoch - (next_batch == 0 ? 1 : 0); }
};

// A checkpoint's "position": these fields and the ranks that wrote it (JSON has no infinity:
// best_valid_loss null means no validation yet).
nlohmann::json position_json(const Position& p, double wall_s, int world_size);
Position position_from_json(const nlohmann::json& j);

}  // namespace normlab::train
