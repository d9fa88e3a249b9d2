#include "train/grad_reducer.h"

#include <torch/torch.h>

namespace normlab::train {
namespace {

// Consecutive parameters of one dtype and device, at most `cap` bytes each (a larger tensor
// alone).
std::vector<std::vector<size_t>> make_buckets(const std::vector<torch::Tensor>& params, int64_t cap) {
  std::vector<std::vector<size_t>> buckets;
  int64_t bytes = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    const int64_t n = p.numel() * static_cast<int64_t>(p.element_size());
    const bool fits = !buckets.empty() && bytes + n <= cap &&
                      params[buckets.back().front()].scalar_type() == p.scalar_type() &&
                      params[buckets.back().front()].device() == p.device();
    if (!fits) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += n;
  }
  return buckets;
}

// The bucket's tensors (`get(i)`, undefined for zeros) flattened into one, reduced by `op`, and
// handed back piece by piece to `put(i, piece)`.
template <class Get, class Op, class Put>
void through_bucket(const std::vector<torch::Tensor>& params, const std::vector<size_t>& bucket, const Get& get,
                    const Op& op, const Put& put) {
  std::vector<torch::Tensor> pieces;
  for (size_t i : bucket) {
    auto t = get(i);
    pieces.push_back(t.defined() ? t.reshape(-1) : torch::zeros({params[i].numel()}, params[i].options()));
  }
  auto flat = torch::cat(pieces);
  op(flat);
  int64_t offset = 0;
  for (size_t i : bucket) {
    const int64_t n = params[i].numel();
    put(i, flat.slice(0, offset, offset + n).view(params[i].sizes()));
    offset += n;
  }
}

}  // namespace

GradientReducer::GradientReducer(std::vector<torch::Tensor> params, core::ProcessGroup& group, int64_t bucket_bytes)
    : params_(std::move(params)), group_(group), buckets_(make_buckets(params_, bucket_bytes)) {}

void GradientReducer::all_reduce() {
  if (group_.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (const auto& bucket : buckets_)
    through_bucket(
        params_, bucket, [&](size_t i) { return params_[i].grad(); },
        [&](torch::Tensor& flat) { group_.all_reduce_sum(flat); },
        [&](size_t i, const torch::Tensor& sum) {
          auto& grad = params_[i].mutable_grad();
          if (grad.defined())
            grad.copy_(sum);
          else
            grad = sum.clone();
        });
}

void broadcast_parameters(const std::vector<torch::Tensor>& params, core::ProcessGroup& group) {
  if (group.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (const auto& bucket : make_buckets(params, kBucketBytes))
    through_bucket(
        params, bucket, [&](size_t i) { return params[i]; }, [&](torch::Tensor& flat) { group.broadcast(flat); },
        [&](size_t i, const torch::Tensor& value) { params[i].copy_(value); });
}

}  // namespace normlab::train
