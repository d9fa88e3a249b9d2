#include "train/grad_reducer.h"

#include <memory>
#include <numeric>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

namespace normlab::train {
namespace {

// params[order[0]], params[order[1]], ... cut into runs of one dtype and device, the first at
// most `first_cap` bytes and the others at most `cap` (a larger tensor alone).
std::vector<std::vector<size_t>> make_buckets(const std::vector<torch::Tensor>& params,
                                              const std::vector<size_t>& order, int64_t first_cap, int64_t cap) {
  std::vector<std::vector<size_t>> buckets;
  int64_t bytes = 0;
  for (size_t i : order) {
    const auto& p = params[i];
    const int64_t n = p.numel() * static_cast<int64_t>(p.element_size());
    const bool fits = !buckets.empty() && bytes + n <= (buckets.size() == 1 ? first_cap : cap) &&
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

// Runs `fn` after autograd has accumulated a parameter's gradient (the engine's hook for
// leaves, that of torch.Tensor.register_post_accumulate_grad_hook).
class AfterAccumulation : public torch::autograd::PostAccumulateGradHook {
 public:
  explicit AfterAccumulation(std::function<void()> fn) : fn_(std::move(fn)) {}
  void operator()(const torch::autograd::Variable&) override { fn_(); }

 private:
  std::function<void()> fn_;
};

}  // namespace

GradientReducer::GradientReducer(std::vector<torch::Tensor> params, core::ProcessGroup& group, double bucket_cap_mb)
    : group_(group) {
  for (auto& p : params)
    if (p.requires_grad()) params_.push_back(std::move(p));
  if (group_.size() == 1) return;
  std::vector<size_t> reversed(params_.size());
  std::iota(reversed.rbegin(), reversed.rend(), size_t{0});
  const auto cap = static_cast<int64_t>(bucket_cap_mb * (1 << 20));
  torch::NoGradGuard no_grad;
  views_.resize(params_.size());
  bucket_of_.resize(params_.size());
  for (auto& indices : make_buckets(params_, reversed, std::min(kFirstBucketBytes, cap), cap)) {
    int64_t numel = 0;
    for (size_t i : indices) numel += params_[i].numel();
    Bucket bucket;
    bucket.flat = torch::zeros({numel}, params_[indices.front()].options());
    int64_t offset = 0;
    for (size_t i : indices) {
      const int64_t n = params_[i].numel();
      views_[i] = bucket.flat.slice(0, offset, offset + n).view(params_[i].sizes());
      bucket_of_[i] = buckets_.size();
      offset += n;
    }
    bucket.params = std::move(indices);
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].mutable_grad() = views_[i];
    torch::autograd::impl::set_post_acc_grad_hooks(params_[i],
                                                   std::make_unique<AfterAccumulation>([this, i] { ready(i); }));
  }
}

GradientReducer::~GradientReducer() {
  if (group_.size() == 1) return;
  for (auto& p : params_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

void GradientReducer::zero_grad() {
  if (group_.size() == 1) {
    for (auto& p : params_) p.mutable_grad().reset();
    return;
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i)  // a backward with create_graph replaces the view
    if (!params_[i].grad().is_same(views_[i])) params_[i].mutable_grad() = views_[i];
  for (auto& b : buckets_) b.flat.zero_();
}

void GradientReducer::arm() {
  if (group_.size() == 1) return;
  armed_ = true;
  overlapped_ = 0;
  for (auto& b : buckets_) b.pending = b.params.size();
}

// Runs on the thread that executes the parameter's accumulation: the caller's for CPU
// tensors, the device's autograd thread for one GPU; never two at once.
void GradientReducer::ready(size_t param) {
  if (!armed_) return;  // an earlier backward pass of the update, or one outside training
  auto& grad = params_[param].mutable_grad();
  if (!grad.is_same(views_[param])) {  // someone set the gradient to another tensor
    torch::NoGradGuard no_grad;
    views_[param].copy_(grad);
    grad = views_[param];
  }
  auto& bucket = buckets_[bucket_of_[param]];
  if (bucket.pending == 0) return;  // counted already
  --bucket.pending;
  size_t up_to = next_;
  while (up_to < buckets_.size() && buckets_[up_to].pending == 0) ++up_to;
  overlapped_ += static_cast<int64_t>(up_to - next_);
  start(up_to);
}

void GradientReducer::start(size_t up_to) {
  for (; next_ < up_to; ++next_) buckets_[next_].all_reduce = group_.start_all_reduce_sum(buckets_[next_].flat);
}

void GradientReducer::finish() {
  if (group_.size() == 1) return;
  if (!armed_) overlapped_ = 0;
  armed_ = false;
  start(buckets_.size());
  for (auto& b : buckets_) b.all_reduce.wait();
  next_ = 0;
}

void broadcast_parameters(const std::vector<torch::Tensor>& params, core::ProcessGroup& group) {
  if (group.size() == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const auto cap = static_cast<int64_t>(kBucketCapMb * (1 << 20));
  for (const auto& bucket : make_buckets(params, order, cap, cap)) {
    std::vector<torch::Tensor> pieces;
    for (size_t i : bucket) pieces.push_back(params[i].reshape(-1));
    auto flat = torch::cat(pieces);
    group.broadcast(flat);
    int64_t offset = 0;
    for (size_t i : bucket) {
      const int64_t n = params[i].numel();
      params[i].copy_(flat.slice(0, offset, offset + n).view(params[i].sizes()));
      offset += n;
    }
  }
}

}  // namespace normlab::train
