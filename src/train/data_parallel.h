// Data parallelism as one part of the trainer (Marian's GraphGroup, docs/distributed.md): which
// batches this rank takes, the gradient all-reduce, the sums of every rank, each rank's dropout
// stream, and which rank writes. One process is the job of one rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/process_group.h"
#include "data/batching.h"
#include "model/checkpoint.h"
#include "train/grad_reducer.h"

namespace normlab::train {

// What an update or a validation sums over the ranks.
struct Sums {
  double loss = 0, nll = 0;
  int64_t tokens = 0;
  int64_t out_of_time = 0;  // ranks whose clock passed --stop-time-hours (summed with the rest)
  int64_t correct = 0;      // validation: targets that are the logits' argmax (corpus_loss.h)
};

class DataParallel {
 public:
  explicit DataParallel(core::ProcessGroup& group) : group_(group) {}
  core::ProcessGroup& group() const { return group_; }
  int ranks() const { return group_.size(); }
  bool writer() const { return group_.is_main(); }  // rank 0 writes RUN_DIR, alone
  data::Shard shard() const { return {group_.rank(), group_.size()}; }

  // Runs `f` on rank 0 first, then on the others (rank 0 writes a cache that they read).
  void in_turn(const std::function<void()>& f) const;
  Sums all_reduced(const Sums& s) const;

  // After the model is made: a new run starts every rank from rank 0's parameters (DDP); the
  // reducer all-reduces the gradients in buckets during backward.
  void attach(const std::vector<torch::Tensor>& params, double bucket_cap_mb, bool broadcast);
  GradientReducer& reducer() { return *reducer_; }
  // Of the batches [0, span) of one update, the last this rank takes (-1: none).
  int64_t last_owned(int64_t span) const;

  // Each rank's dropout stream: rank 0 keeps --seed's, so one rank trains as one process does;
  // a resumed rank continues the stream saved for it in `saved`, when there is one.
  void seed_streams(uint64_t seed, const model::TensorMap* saved) const;
  // Every rank's stream (a collective), into a checkpoint's extra tensors.
  void save_streams(model::TensorMap& extra) const;

 private:
  core::ProcessGroup& group_;
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace normlab::train
