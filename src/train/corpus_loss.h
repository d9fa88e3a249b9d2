// Label-smoothed loss and nll summed over a corpus of sentence pairs or text blocks, dropout off: what
// validation, `--test` and `normlab evaluate` report.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batching.h"
#include "model/model.h"
#include "train/criterion.h"

namespace normlab::train {

struct CorpusLoss {
  double loss = 0, nll = 0;  // summed over target tokens (</s> included), nats
  int64_t tokens = 0;
};

// Pairs `indices` of (src, tgt), batched by `batching` (seed 0 order; the sum does not depend
// on it beyond float rounding), in evaluation mode without autograd, on the model's device; the
// model's mode is restored afterwards. Only the batches `shard` owns (one rank's share; the
// caller sums them). The loss is criterion.h's without the z-loss whatever options.z_loss says:
// the z-loss is a training regulariser, and without it validation losses compare across runs.
// `layout`: how the examples become rows (data/batch.h).
CorpusLoss corpus_loss(model::Model model, const std::vector<data::Sentence>& src,
                       const std::vector<data::Sentence>& tgt, const std::vector<int64_t>& indices,
                       const data::BatchingConfig& batching, uint64_t seed, const LossOptions& options,
                       const data::Shard& shard = {}, data::Layout layout = data::Layout::kPairs);

}  // namespace normlab::train
