// The names of the checkpoints in a run's checkpoints folder (docs/training.md), fairseq's:
// checkpoint<E>.pt at the end of epoch E, checkpoint_<E>_<U>.pt every --save-interval-updates U,
// checkpoint_last.pt and checkpoint_best.pt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace normlab::train {

std::string epoch_checkpoint_name(int64_t epoch);
std::string update_checkpoint_name(int64_t epoch, int64_t update);

// The epoch of checkpoint<E>.pt, or with `by_update` the update of checkpoint_<E>_<U>.pt;
// nullopt for any other name.
std::optional<int64_t> numbered_checkpoint(const std::string& filename, bool by_update);

// The `count` newest numbered checkpoints of a checkpoints folder, newest first (fairseq's
// order): by epoch, or with `by_update` by update; with `upper_bound` > 0 only those at or below
// it. Throws std::invalid_argument naming the folder when it holds fewer.
std::vector<std::string> last_checkpoints(const std::string& dir, int count, bool by_update, int64_t upper_bound);

// The checkpoint_<E>_<U>.pt of `dir` with U = `update` (train --init-from-update). Throws
// std::invalid_argument naming the folder, and the updates it has, when there is none.
std::string update_checkpoint_path(const std::string& dir, int64_t update);

}  // namespace normlab::train
