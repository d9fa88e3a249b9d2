// Label-smoothed loss and nll summed over a corpus of sentence pairs or text blocks, dropout off: what
// validation, `--test`, `normlab evaluate` and `normlab eval-lm` report.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batching.h"
#include "model/model.h"
#include "train/criterion.h"
#include "train/train_data.h"

namespace normlab::train {

struct CorpusLoss {
  double loss = 0, nll = 0;  // summed over target tokens (</s> included), nats
  int64_t tokens = 0;
  int64_t correct = 0;       // target tokens that are the logits' argmax (a masked LM's or a classifier's accuracy)
};

// The examples corpus.kept, gathered as gather() does (an encoder's with epoch 0's masks), batched
// by `batching` (seed 0 order; the sum does not depend on it beyond float rounding), in evaluation
// mode without autograd, on the model's device; the model's mode is restored afterwards. Only the
// batches `shard` owns (one rank's share; the caller sums them). The loss is criterion.h's without
// the z-loss whatever options.z_loss says: the z-loss is a training regulariser, and without it
// validation losses compare across runs.
CorpusLoss corpus_loss(model::Model model, const Corpus& corpus, const data::BatchingConfig& batching, uint64_t seed,
                       const LossOptions& options, const data::Shard& shard = {});

}  // namespace normlab::train
