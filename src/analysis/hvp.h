// Exact full-data Hessian-vector products of the training loss by double back-propagation
// (Pearlmutter 1994; REFERENCE §4): Hv = d/dθ (g(θ) · v), with the loss the criterion's
// (train/criterion.h) averaged over ALL target tokens of the data set, dropout off.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "core/process_group.h"
#include "data/batch.h"
#include "model/model.h"
#include "train/criterion.h"

namespace normlab::analysis {

// A symmetric operator on flat vectors (n) -> (n); the algorithms below see nothing else.
using LinearOperator = std::function<torch::Tensor(const torch::Tensor&)>;

class FullDataHessian {
 public:
  // Parameters whose stored name matches `params_regex` (std::regex_search) span the vector
  // space, in the model's order; the others are frozen (requires_grad off). The model is put
  // in eval mode (dropout off). Throws std::invalid_argument when nothing matches or there
  // are no target tokens.
  // keep_graphs: keep every batch's first-order gradient with its autograd graph after the
  // first product, so that each later product costs only the double backward (PyHessian's
  // single-batch mode keeps its one graph the same way); memory: all batches' graphs at once.
  // With several ranks in `group`, every rank is given the whole set's batches, keeps every
  // WORLD_SIZE-th, and each product and gradient is the all-reduced sum: the same on every rank.
  FullDataHessian(model::Model model, std::vector<data::Batch> batches, const train::LossOptions& loss,
                  const std::string& params_regex, const torch::Device& device, bool keep_graphs = false,
                  core::ProcessGroup group = core::ProcessGroup());

  int64_t dim() const { return dim_; }
  int64_t tokens() const { return tokens_; }        // target tokens of the whole set
  int64_t sentences() const { return sentences_; }
  const std::vector<std::pair<std::string, torch::Tensor>>& params() const { return params_; }
  torch::Dtype dtype() const;

  // H v over the whole set: sum over batches of the Hessian of each batch's summed loss
  // (= its mean weighted by its target tokens), divided by tokens(). One batch's graph at a
  // time unless keep_graphs. v (n) -> (n).
  torch::Tensor hvp(const torch::Tensor& v) const;
  // The full-data gradient (n) and loss per token.
  std::pair<torch::Tensor, double> gradient() const;
  // The loss per token alone (no autograd).
  double loss() const;
  LinearOperator as_operator() const;

  // Offsets of each parameter inside the flat vector (params()[i] occupies
  // [offset(i), offset(i) + numel)).
  int64_t offset(size_t i) const { return offsets_[i]; }

 private:
  // The batch's summed label-smoothed loss divided by tokens(): its share of the mean, scalar.
  torch::Tensor batch_loss(const data::Batch& b) const;
  // Batch b's first-order gradient with its graph: the (parameter index, g_i) of every g_i
  // that depends on θ (the others add nothing to Hv). Cached when keep_graphs_.
  std::vector<std::pair<size_t, torch::Tensor>> first_order(size_t b) const;
  // An (n) vector for a result, uninitialised: the previous result's memory when the caller
  // no longer holds it (nor a view of it), else a new one.
  torch::Tensor result_buffer() const;
  // out's slice of each parameter = parts[i] when first, else += parts[i] (undefined parts:
  // the loss does not reach the parameter, zeros).
  void add_into(torch::Tensor& out, const std::vector<torch::Tensor>& parts, bool first) const;

  mutable model::Model model_;  // forward() is not const
  std::vector<data::Batch> batches_;  // this rank's share
  mutable core::ProcessGroup group_;
  train::LossOptions loss_;
  torch::Device device_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<torch::Tensor> inputs_;  // params_'s tensors, as autograd::grad takes them
  std::vector<int64_t> offsets_;
  int64_t dim_ = 0, tokens_ = 0, sentences_ = 0;
  bool keep_graphs_ = false;
  mutable std::vector<std::vector<std::pair<size_t, torch::Tensor>>> kept_;  // per batch, when keep_graphs_
  mutable torch::Tensor spare_;  // the last result's memory (result_buffer)
};

}  // namespace normlab::analysis
