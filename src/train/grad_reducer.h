// Data parallelism's gradient sum (REFERENCE §8): after the backward passes of an update, every
// parameter's gradient becomes the sum over all ranks, in buckets of about 25 MB (DDP's
// bucket_cap_mb) so that one all-reduce carries many parameters. Not overlapped with backward:
// docs/distributed.md says what that costs.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "core/process_group.h"

namespace normlab::train {

constexpr int64_t kBucketBytes = int64_t{25} << 20;  // DDP's bucket_cap_mb

class GradientReducer {
 public:
  // `params` in the same order on every rank; a bucket holds parameters of one dtype and device.
  GradientReducer(std::vector<torch::Tensor> params, core::ProcessGroup& group,
                  int64_t bucket_bytes = kBucketBytes);
  // Sums the gradients across ranks in place. A parameter with no gradient on this rank (no
  // batch in this update, or unused) takes part as zeros and gets the sum as its gradient.
  void all_reduce();

 private:
  std::vector<torch::Tensor> params_;
  core::ProcessGroup& group_;
  std::vector<std::vector<size_t>> buckets_;  // indices into params_
};

// Makes every rank's `params` rank 0's (DDP's broadcast at construction), bucketed likewise.
void broadcast_parameters(const std::vector<torch::Tensor>& params, core::ProcessGroup& group);

}  // namespace normlab::train
