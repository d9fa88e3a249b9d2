// The one interface of everything that watches or joins a training run: traces, logits,
// curvature, validation BLEU, progress (docs/architecture.md, "The phases of a step"). The
// trainer walks one list of callbacks at each event; a new instrument is one class that
// overrides the events it needs, added where the list is built (apps/normlab/cmd_train.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

#include "core/process_group.h"
#include "data/batch.h"
#include "data/vocab.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "train/optimizer.h"
#include "train/train_config.h"
#include "train/train_data.h"

namespace normlab::train {

// What a callback may use of a run once it is set up (train_begins); it lives until train() returns.
struct RunContext {
  const TrainConfig& config;      // as resolved (--init-from: the grown model; vocabulary sizes 0, see net)
  model::Model net;               // on its device, in training mode
  std::string dir;                // RUN_DIR
  int64_t update = 0;             // updates made before this run (0: a new run)
  int64_t epoch = 1;              // the epoch it starts in
  int64_t planned_updates = 0;    // the update at which it will stop (--max-steps, or --max-epochs' worth)
  bool writer = true;             // this process writes RUN_DIR (rank 0)
  core::ProcessGroup& group;
  c10::Device device;
  const data::Vocab& vocab;
  const Corpus& valid;            // the validation set, filtered as validation reads it
  const model::TensorMap& saved;  // the resumed checkpoint's extra tensors (empty for a new run)
  const Optimizer& optimizer;
  // The rate of update n (1-based) in epoch e as the trainer makes it: the schedule's times every
  // callback's rate_factor(n). A callback that reports the next update's rate in update_done
  // reads it here, after the callbacks before it in the list have decided theirs.
  std::function<double(int64_t n, int64_t e)> rate;
};

// One update as made (update_done): its position, rate and sums over every rank.
struct UpdateReport {
  int64_t update = 0;             // updates made, this one included
  int64_t epoch = 1;
  int64_t next_batch = 0;         // of the epoch's batches (n_batches)
  int64_t n_batches = 0;
  double lr = 0, grad_norm = 0;   // the rate it was made at; the gradient norm before clipping
  double loss = 0, nll = 0;       // summed over its target tokens
  int64_t tokens = 0;
  double loss_scale = 0;          // fp16's loss scale after the update (0: no loss scaling)
  double sync_s = 0;              // waiting for the gradient all-reduce after backward (several ranks)
  int64_t overlapped = 0, reduced = 0;  // gradient buckets: started during backward, all
  const Optimizer& optimizer;
};

class TrainCallback {
 public:
  virtual ~TrainCallback() = default;
  // Problems with the run's options for this instrument, naming the option (with TrainConfig::problems()).
  // `config` as resolved: with --init-from, the checkpoint's model as grown.
  virtual std::vector<std::string> problems(const TrainConfig& /*config*/, const core::ProcessGroup& /*group*/) const {
    return {};
  }
  // Its settings, into config.json (before a resumed run is compared with its checkpoint).
  virtual void add_settings(nlohmann::json& /*config*/) const {}
  // The run is set up (model, optimiser, data; a resumed run's state in run.saved), before its first update.
  virtual void train_begins(const RunContext& /*run*/) {}
  // Update `update` begins, before its first forward; wants_updates: record p_new - p_old of it.
  virtual void update_begins(int64_t /*update*/) {}
  virtual bool wants_updates(int64_t /*update*/) const { return false; }
  // A training batch before its forward (on the CPU), then the forward's logits (B,T,V).
  virtual void batch_ready(const data::Batch& /*batch*/) {}
  virtual void output_ready(const torch::Tensor& /*logits*/, const torch::Tensor& /*target*/) {}
  // The factor on the schedule's rate of update `update` (1-based), asked just before it is made
  // (--warmup auto's ramp: analysis/auto_warmup.h); 1 for an instrument that only watches.
  virtual double rate_factor(int64_t /*update*/) const { return 1.0; }
  // The gradients of update `update` are final (summed, divided by the tokens, clipped), before the step.
  virtual void gradients_ready(int64_t /*update*/) {}
  // The update is made (its p_new - p_old in report.optimizer.last_updates() when wanted).
  virtual void update_done(const UpdateReport& /*report*/) {}
  // No update follows: before the final validation (not after a divergence).
  virtual void training_ends() {}
  // A validation record (valid_loss, ...) before it is written: the callback may add fields.
  virtual void validation_done(nlohmann::json& /*record*/) {}
  // What a resumed run needs to continue exactly, into the checkpoint's extra tensors (rank 0).
  virtual void save_state(model::TensorMap& /*extra*/) const {}
};

using TrainCallbacks = std::vector<std::unique_ptr<TrainCallback>>;

}  // namespace normlab::train
