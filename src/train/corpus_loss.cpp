#include "train/corpus_loss.h"

#include <torch/torch.h>

#include "core/tokens.h"

namespace normlab::train {

CorpusLoss corpus_loss(model::Seq2Seq& model, const std::vector<data::Sentence>& src,
                       const std::vector<data::Sentence>& tgt, const std::vector<int64_t>& indices,
                       const data::BatchingConfig& batching, uint64_t seed, double eps,
                       LabelSmoothingFormula formula, const c10::Device& device, const data::Shard& shard) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  CorpusLoss sums;
  const auto sizes = data::example_sizes(src, tgt);
  const auto batches = data::make_batches(sizes, indices, batching, seed, 0);
  for (size_t k = 0; k < batches.size(); ++k) {
    if (!shard.owns(static_cast<int64_t>(k))) continue;
    const auto& batch = batches[k];
    std::vector<data::Sentence> s, t;
    for (auto i : batch) {
      s.push_back(src[static_cast<size_t>(i)]);
      t.push_back(tgt[static_cast<size_t>(i)]);
    }
    auto b = data::make_batch(s, t, 0, s.size());
    auto logits = model->forward(b.src.to(device), b.prev_output_tokens.to(device));
    auto l = label_smoothed_nll(logits, b.target.to(device), eps, formula, kPad);
    sums.loss += l.loss.item<double>();
    sums.nll += l.nll.item<double>();
    sums.tokens += l.tokens;
  }
  model->train(was_training);
  return sums;
}

}  // namespace normlab::train
