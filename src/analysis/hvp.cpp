#include "analysis/hvp.h"

#include <regex>
#include <stdexcept>

#include <torch/torch.h>

#include "core/tokens.h"

namespace normlab::analysis {

FullDataHessian::FullDataHessian(model::Seq2Seq model, std::vector<data::Batch> batches,
                                 const LossOptions& loss, const std::string& params_regex,
                                 const torch::Device& device)
    : model_(std::move(model)), batches_(std::move(batches)), loss_(loss), device_(device) {
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
  }
  if (params_.empty())
    throw std::invalid_argument("--params: '" + params_regex + "' matches no parameter name");
  for (auto& b : batches_) {
    tokens_ += b.target_tokens;
    sentences_ += b.src.size(0);
    b.src = b.src.to(device_);
    b.prev_output_tokens = b.prev_output_tokens.to(device_);
    b.target = b.target.to(device_);
  }
  if (tokens_ == 0) throw std::invalid_argument("the data set has no target tokens");
}

torch::Dtype FullDataHessian::dtype() const { return params_.front().second.scalar_type(); }

torch::Tensor FullDataHessian::batch_loss(const data::Batch& b) const {
  auto logits = model_->forward(b.src, b.prev_output_tokens);  // (B,T,V)
  return train::label_smoothed_nll(logits, b.target, loss_.label_smoothing, loss_.formula, kPad).loss;
}

void FullDataHessian::add_flat(torch::Tensor& out, const std::vector<torch::Tensor>& parts) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!parts[i].defined()) continue;  // a parameter the loss does not reach
    out.narrow(0, offsets_[i], params_[i].second.numel()).add_(parts[i].reshape(-1));
  }
}

torch::Tensor FullDataHessian::hvp(const torch::Tensor& v) const {
  TORCH_CHECK(v.dim() == 1 && v.size(0) == dim_, "hvp: expected a vector of ", dim_, " entries, got ",
              v.sizes());
  std::vector<torch::Tensor> inputs, pieces;
  for (size_t i = 0; i < params_.size(); ++i) {
    inputs.push_back(params_[i].second);
    pieces.push_back(v.narrow(0, offsets_[i], params_[i].second.numel())
                         .view(params_[i].second.sizes())
                         .to(device_, params_[i].second.scalar_type()));
  }
  auto out = torch::zeros({dim_}, v.options().device(device_));
  for (const auto& b : batches_) {
    torch::AutoGradMode grad_mode(true);
    auto g = torch::autograd::grad({batch_loss(b)}, inputs, {}, /*retain_graph=*/true,
                                   /*create_graph=*/true, /*allow_unused=*/true);
    auto gv = torch::zeros({}, out.options());
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i].defined()) gv = gv + (g[i] * pieces[i]).sum();
    if (!gv.requires_grad()) continue;  // no selected parameter reaches this batch's loss twice
    auto hv = torch::autograd::grad({gv}, inputs, {}, /*retain_graph=*/false,
                                    /*create_graph=*/false, /*allow_unused=*/true);
    add_flat(out, hv);
  }
  return out.div_(static_cast<double>(tokens_)).to(v.device());
}

std::pair<torch::Tensor, double> FullDataHessian::gradient() const {
  std::vector<torch::Tensor> inputs;
  for (const auto& p : params_) inputs.push_back(p.second);
  auto out = torch::zeros({dim_}, params_.front().second.options());
  double loss = 0.0;
  for (const auto& b : batches_) {
    torch::AutoGradMode grad_mode(true);
    auto l = batch_loss(b);
    loss += l.item<double>();
    add_flat(out, torch::autograd::grad({l}, inputs, {}, false, false, /*allow_unused=*/true));
  }
  return {out.div_(static_cast<double>(tokens_)), loss / static_cast<double>(tokens_)};
}

LinearOperator FullDataHessian::as_operator() const {
  return [this](const torch::Tensor& v) { return hvp(v); };
}

}  // namespace normlab::analysis
