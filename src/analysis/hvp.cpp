#include "analysis/hvp.h"

#include <regex>
#include <stdexcept>

#include <torch/torch.h>

#include "data/batching.h"

namespace normlab::analysis {

FullDataHessian::FullDataHessian(model::Model model, std::vector<data::Batch> batches,
                                 const train::LossOptions& loss, const std::string& params_regex,
                                 const torch::Device& device, bool keep_graphs, core::ProcessGroup group)
    : model_(std::move(model)), group_(std::move(group)), loss_(loss), device_(device), keep_graphs_(keep_graphs) {
  TORCH_CHECK(model_->precision() == model::Precision::kFp32,
              "Hessian-vector products run in fp32 or fp64, not ", model::to_string(model_->precision()));
  std::regex re;
  try {
    re = std::regex(params_regex);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument("--params: '" + params_regex + "' is not a regular expression (" +
                                e.what() + ")");
  }
  model_->to(device_);
  model_->eval();  // dropout off (REFERENCE §4)
  for (const auto& p : model_->named_parameters()) {
    const bool selected = std::regex_search(p.key(), re);
    p.value().set_requires_grad(selected);
    if (!selected) continue;
    offsets_.push_back(dim_);
    dim_ += p.value().numel();
    params_.emplace_back(p.key(), p.value());
    inputs_.push_back(p.value());
  }
  if (params_.empty())
    throw std::invalid_argument("--params: '" + params_regex + "' matches no parameter name");
  const data::Shard shard{group_.rank(), group_.size()};
  for (size_t k = 0; k < batches.size(); ++k) {
    auto& b = batches[k];
    tokens_ += b.target_tokens;
    sentences_ += b.src.size(0);
    if (!shard.owns(static_cast<int64_t>(k))) continue;
    b.src = b.src.to(device_);
    b.prev_output_tokens = b.prev_output_tokens.to(device_);
    b.target = b.target.to(device_);
    batches_.push_back(std::move(b));
  }
  if (tokens_ == 0) throw std::invalid_argument("the data set has no target tokens");
}

torch::Dtype FullDataHessian::dtype() const { return params_.front().second.scalar_type(); }

torch::Tensor FullDataHessian::batch_loss(const data::Batch& b) const {
  const auto sums = train::loss(model_, b, loss_).sums;
  // This batch's share of the full-data mean: dividing the scalar here (not the (n) result at
  // the end) costs nothing, and sum_b d²(loss_b / N) = H.
  return sums.loss / static_cast<double>(tokens_);
}

torch::Tensor FullDataHessian::hvp(const torch::Tensor& v) const {
  TORCH_CHECK(v.dim() == 1 && v.size(0) == dim_, "hvp: expected a vector of ", dim_, " entries, got ",
              v.sizes());
  // v as parameter-shaped views (no copy when v already has the model's device and dtype).
  const auto vd = v.to(device_, dtype());
  std::vector<torch::Tensor> pieces;
  for (size_t i = 0; i < params_.size(); ++i)
    pieces.push_back(vd.narrow(0, offsets_[i], params_[i].second.numel()).view(params_[i].second.sizes()));
  auto out = result_buffer();
  bool written = false;
  for (size_t b = 0; b < batches_.size(); ++b) {
    torch::AutoGradMode grad_mode(true);
    // Hv = d/dθ <g, v>: the gradient of the g_i with grad_outputs v_i, no graph for the dot
    // product.
    std::vector<torch::Tensor> outputs, directions;
    for (const auto& [i, g] : first_order(b)) {
      outputs.push_back(g);
      directions.push_back(pieces[i]);
    }
    if (outputs.empty()) continue;
    add_into(out, torch::autograd::grad(outputs, inputs_, directions, /*retain_graph=*/keep_graphs_,
                                        /*create_graph=*/false, /*allow_unused=*/true),
             !written);
    written = true;
  }
  if (!written) out.zero_();  // no batch (of this rank's share) depends on θ
  group_.all_reduce_sum(out);
  return out.to(v.device(), v.scalar_type());
}

std::vector<std::pair<size_t, torch::Tensor>> FullDataHessian::first_order(size_t b) const {
  if (keep_graphs_ && kept_.size() > b) return kept_[b];
  auto g = torch::autograd::grad({batch_loss(batches_[b])}, inputs_, {}, /*retain_graph=*/true,
                                 /*create_graph=*/true, /*allow_unused=*/true);
  std::vector<std::pair<size_t, torch::Tensor>> fresh;
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].defined() && g[i].requires_grad()) fresh.emplace_back(i, g[i]);
  if (keep_graphs_) kept_.push_back(fresh);  // batches are visited in order: kept_.size() == b
  return fresh;
}

std::pair<torch::Tensor, double> FullDataHessian::gradient() const {
  auto out = result_buffer();
  double loss = 0.0;
  if (batches_.empty()) out.zero_();  // a rank without a batch
  for (size_t b = 0; b < batches_.size(); ++b) {
    torch::AutoGradMode grad_mode(true);
    auto l = batch_loss(batches_[b]);
    loss += l.item<double>();
    add_into(out, torch::autograd::grad({l}, inputs_, {}, false, false, /*allow_unused=*/true), b == 0);
  }
  group_.all_reduce_sum(out);
  auto total = torch::tensor({loss}, torch::kDouble);
  group_.all_reduce_sum(total);
  return {out, total.item<double>()};
}

double FullDataHessian::loss() const {
  torch::NoGradGuard no_grad;
  double sum = 0.0;
  for (const auto& b : batches_) sum += batch_loss(b).item<double>();
  auto total = torch::tensor({sum}, torch::kDouble);
  group_.all_reduce_sum(total);
  return total.item<double>();
}

torch::Tensor FullDataHessian::result_buffer() const {
  // A fresh (n) buffer costs its page faults: gathering 32M floats took 65 ms into a new one,
  // 19.5 ms into one written before (docs/performance.md). So the last result's memory is
  // used again once no tensor (nor view) of the caller's refers to it any more.
  const bool free = spare_.defined() && spare_.use_count() == 1 && spare_.storage().use_count() == 1;
  if (!free) spare_ = torch::empty({dim_}, params_.front().second.options().requires_grad(false));
  return spare_;
}

void FullDataHessian::add_into(torch::Tensor& out, const std::vector<torch::Tensor>& parts, bool first) const {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto slice = out.narrow(0, offsets_[i], params_[i].second.numel()).view(params_[i].second.sizes());
    if (!parts[i].defined()) {  // a parameter the loss does not reach
      if (first) slice.zero_();
    } else if (first) {
      slice.copy_(parts[i]);
    } else {
      slice.add_(parts[i]);
    }
  }
}

LinearOperator FullDataHessian::as_operator() const {
  return [this](const torch::Tensor& v) { return hvp(v); };
}

}  // namespace normlab::analysis
