#include "train/corpus_loss.h"

#include <torch/torch.h>

namespace normlab::train {

CorpusLoss corpus_loss(model::Model model, const std::vector<data::Sentence>& src,
                       const std::vector<data::Sentence>& tgt, const std::vector<int64_t>& indices,
                       const data::BatchingConfig& batching, uint64_t seed, const LossOptions& options,
                       const data::Shard& shard, data::Layout layout) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const LossOptions without_z_loss{options.label_smoothing, options.formula, 0.0};
  CorpusLoss sums;
  const auto sizes = data::example_sizes(src, tgt, layout);
  const auto batches = data::make_batches(sizes, indices, batching, seed, 0);
  for (size_t k = 0; k < batches.size(); ++k) {
    if (!shard.owns(static_cast<int64_t>(k))) continue;
    const auto b = data::gather_batch(src, tgt, batches[k], layout);
    const auto l = loss(model, b, without_z_loss).sums;
    sums.loss += l.loss.item<double>();
    sums.nll += l.nll.item<double>();
    sums.tokens += l.tokens;
  }
  model->train(was_training);
  return sums;
}

}  // namespace normlab::train
