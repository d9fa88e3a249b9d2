// `normlab train`: the training loop (docs/training.md; its phases: docs/architecture.md). The
// run folder it writes: train/run_dir.h; its options: train/train_config.h.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

#include "core/process_group.h"
#include "train/callback.h"
#include "train/train_config.h"

namespace normlab::train {

struct TrainResult {
  int64_t updates = 0;
  int64_t epochs = 0;
  bool diverged = false;
  double best_valid_loss = 0.0;  // per token, nats
};

// Trains, or resumes from RUN_DIR's newest intact checkpoint when there is one; a run that has
// reached its limits is left as it is. `callbacks` watch and join the run (train/callback.h; the
// trainer adds its own progress records first). With several ranks in `group`
// (docs/distributed.md), each takes every WORLD_SIZE-th batch and rank 0 alone writes RUN_DIR.
TrainResult train(const TrainConfig& config, TrainCallbacks callbacks, const c10::Device& device,
                  core::ProcessGroup& group);

}  // namespace normlab::train
