// Data parallelism's gradient sum (REFERENCE §8), overlapped with backward as PyTorch's DDP
// does it: every trainable parameter's gradient is a view into one of a few flat buckets
// (DDP's gradient_as_bucket_view), the buckets filled in reverse parameter order (roughly the
// order in which backward produces the gradients), the first at most 1 MB and the others at
// most --bucket-cap-mb (DDP's first_bucket_bytes_cap and bucket_cap_mb). During this rank's
// last backward pass of an update a hook after each gradient's accumulation counts it, and a
// bucket whose gradients are all written starts its all-reduce at once while backward goes on;
// buckets start in bucket order on every rank. docs/distributed.md.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "core/process_group.h"

namespace normlab::train {

constexpr double kBucketCapMb = 25.0;                    // DDP's bucket_cap_mb
constexpr int64_t kFirstBucketBytes = int64_t{1} << 20;  // DDP's first_bucket_bytes_cap

class GradientReducer {
 public:
  // `params` in the same order on every rank; those that need no gradient take no part. With
  // one process nothing is bucketed and no hook is set.
  GradientReducer(std::vector<torch::Tensor> params, core::ProcessGroup& group, double bucket_cap_mb = kBucketCapMb);
  ~GradientReducer();  // removes the hooks
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before an update's backward passes: every gradient zero, a view into its bucket again (one
  // process: none, as Module::zero_grad).
  void zero_grad();
  // Before this rank's last backward pass of the update: its hooks start the buckets.
  void arm();
  // After the update's backward passes and before any other collective: starts the buckets
  // that backward did not complete (a parameter without a gradient, or no batch on this rank)
  // and waits for all. Every gradient then holds the sum over the ranks.
  void finish();

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  // Buckets of the last finish() whose all-reduce had started during backward.
  int64_t overlapped() const { return overlapped_; }

 private:
  struct Bucket {
    torch::Tensor flat;          // the gradients of `params`, one after another
    std::vector<size_t> params;  // indices into params_
    size_t pending = 0;          // gradients of the armed backward not yet written
    core::ProcessGroup::Pending all_reduce;
  };
  void ready(size_t param);       // the hook: params_[param]'s gradient is accumulated
  void start(size_t up_to);       // starts buckets next_ .. up_to-1 in order

  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> views_;  // each parameter's gradient in its bucket
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  core::ProcessGroup& group_;
  size_t next_ = 0;  // the first bucket not started
  bool armed_ = false;
  int64_t overlapped_ = 0;
};

// Makes every rank's `params` rank 0's (DDP's broadcast at construction), in 25 MB buckets.
void broadcast_parameters(const std::vector<torch::Tensor>& params, core::ProcessGroup& group);

}  // namespace normlab::train
