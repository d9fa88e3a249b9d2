#include "train/corpus_loss.h"

#include <torch/torch.h>

namespace normlab::train {

CorpusLoss corpus_loss(model::Model model, const Corpus& corpus, const data::BatchingConfig& batching, uint64_t seed,
                       const LossOptions& options, const data::Shard& shard) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const LossOptions without_z_loss{options.label_smoothing, options.formula, 0.0};
  CorpusLoss sums;
  const auto sizes = data::example_sizes(corpus.src, corpus.tgt, corpus.layout);
  const auto batches = data::make_batches(sizes, corpus.kept, batching, seed, 0);
  for (size_t k = 0; k < batches.size(); ++k) {
    if (!shard.owns(static_cast<int64_t>(k))) continue;
    const auto b = gather(corpus, batches[k]);
    const auto l = loss(model, b, without_z_loss);
    sums.loss += l.sums.loss.item<double>();
    sums.nll += l.sums.nll.item<double>();
    sums.tokens += l.sums.tokens;
    const auto target = b.target.to(l.logits.device());
    const auto predicted = target.ne(model::target_padding(model->config()));
    sums.correct += l.logits.argmax(-1).eq(target).logical_and(predicted).sum().item<int64_t>();
  }
  model->train(was_training);
  return sums;
}

}  // namespace normlab::train
